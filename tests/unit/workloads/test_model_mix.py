"""`--model-mix NAME=WEIGHT,...`: its syntax refused in one line, and the draw seeded and in proportion."""

from __future__ import annotations

from collections import Counter

import pytest

from loadproof.workloads.model_mix import draw_models, mix_text, parse_mix


def test_the_weights_are_relative_and_kept_in_order():
    assert parse_mix("base=0.5, a=0.3,b=0.2") == {"base": 0.5, "a": 0.3, "b": 0.2}
    assert mix_text(parse_mix("base=5,a=3")) == "base=5,a=3"


@pytest.mark.parametrize(
    "text, says",
    [
        ("base=0,a=0", "sum to 0"),
        ("base=-1,a=2", "finite number >= 0"),
        ("base=x", "not a number"),
        ("base=1,base=2", "given twice"),
        ("=1", "without a model name"),
        ("base", "NAME=WEIGHT"),
        ("", "NAME=WEIGHT"),
        ("base=inf", "finite number"),
    ],
)
def test_bad_mixes_are_one_line(text, says):
    with pytest.raises(ValueError, match=says):
        parse_mix(text)


def test_the_draw_is_seeded_and_in_proportion():
    mix = {"base": 0.5, "a": 0.3, "b": 0.2, "never": 0.0}
    drawn = draw_models(mix, 10_000, seed=731)
    assert drawn == draw_models(mix, 10_000, seed=731) and drawn != draw_models(mix, 10_000, seed=732)
    shares = Counter(drawn)
    assert "never" not in shares
    for name, weight in (("base", 0.5), ("a", 0.3), ("b", 0.2)):  # 10,000 draws: within 2 points
        assert abs(shares[name] / 10_000 - weight) < 0.02, shares
