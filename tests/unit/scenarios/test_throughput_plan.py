import pytest

from loadproof.config.base import one_line
from loadproof.scenarios.throughput import ThroughputOptions, plan
from loadproof.workloads.prompts import FAMILIES, load_family


def test_every_family_has_at_least_eight_distinct_prompts():
    for family in FAMILIES:
        prompts = load_family(family)
        assert len(prompts) >= 8
        assert len({p.text for p in prompts}) == len(prompts)
        assert len({p.id for p in prompts}) == len(prompts)


def test_plan_shapes():
    waves = plan(ThroughputOptions(families=["code"], concurrency=[1, 4, 8], num_prompts=3, repeats=2))
    singles = [w for w in waves if w[0][1]["concurrency"] == 1]
    batches = [w for w in waves if w[0][1]["concurrency"] > 1]
    assert len(singles) == 3 * 2 and all(len(w) == 1 for w in singles)
    assert sorted(len(w) for w in batches) == [4, 4, 8, 8]
    eight = [w for w in batches if len(w) == 8][0]
    assert len({p.id for p, _ in eight}) == 8  # batches draw from the whole family, not only num_prompts


def test_bad_options_are_one_line():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        ThroughputOptions(families=["klingon"])
    assert "families must be among" in str(one_line(info.value, "opts"))
