import contextlib

import pytest

from loadproof.config.base import one_line
from loadproof.metrics import compute_claims
from loadproof.plans import load_plan
from loadproof.plans.throughput import ThroughputPlan
from loadproof.protocol.sse import DONE_EVENT
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Target
from loadproof.scenarios.throughput import ThroughputOptions, ThroughputScenario, plan
from loadproof.store.run_dir import RunWriter, load_run
from loadproof.workloads.prompts import FAMILIES, load_family
from tests.conftest import Script
from tests.sse_chunks import completion_chunk


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


@pytest.mark.asyncio
async def test_the_scenario_writes_its_typed_plan_and_the_metrics_read_it(sse_server, tmp_path, monkeypatch):
    # the test server has no /metrics (a 404 page does not parse as Prometheus text): a scraper that samples
    # nothing, asked for a sample between levels (speculative decoding's windows)
    asked: list[int] = []

    class NoScraper(contextlib.AbstractAsyncContextManager):
        async def __aexit__(self, *exc: object) -> None:
            return None

        async def sample(self) -> None:
            asked.append(1)

    monkeypatch.setattr(Target, "scraper", lambda *a, **k: NoScraper())
    server = await sse_server(
        [Script(pieces=[completion_chunk(f"t{i}", i + 1) for i in range(4)] + [DONE_EVENT], pause_s=0.002)]
    )
    options = ThroughputOptions(families=["code"], concurrency=[1, 2], max_tokens=4, num_prompts=1)
    with RunWriter(tmp_path / "tp") as writer:
        manifest = Manifest(run_id="tp", scenario="throughput", options=options.model_dump())
        await ThroughputScenario(Target(url=server.url, model="m", endpoint="completions"), options).run(
            writer, manifest
        )
    run = load_run(tmp_path / "tp")
    assert run.manifest.plan_version == ThroughputPlan.version == 2
    assert load_plan(run) == ThroughputPlan(
        families=["code"],
        concurrency=[1, 2],
        max_tokens=4,
        num_prompts=1,
        repeats=1,
        temperature=0.0,
        ignore_eos=False,
        seed=731,
        steady_window=True,
    )
    names = {c.name for c in compute_claims(run)}
    assert {"throughput.code.c1.decode_tokens_per_s", "throughput.code.c2.aggregate_tokens_per_s"} <= names
    assert "throughput.code.c1.steady.unavailable" in names  # a level of one request: too short for MSER-5
    assert len(asked) == 1  # one sample between the two levels, none after the last (the scraper's exit takes it)
