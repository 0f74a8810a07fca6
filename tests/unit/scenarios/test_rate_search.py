"""The rate search against a scripted attainment: brackets by doubling (or halving), bisects to the stated
resolution, never tries a rate twice, and reports the threshold within that resolution."""

import pytest

from loadproof.scenarios.load.rate_search import Resolution, parse_resolution, rate_search


def scripted(threshold: float):
    """Attainment 100% up to `threshold` requests/s, falling linearly above it; a trial passes at >= 99%."""
    tried: list[float] = []

    def passes(rate: float) -> bool:
        tried.append(rate)
        attainment = 1.0 if rate <= threshold else max(0.0, 1.0 - (rate - threshold) / threshold)
        return attainment >= 0.99

    return passes, tried


@pytest.mark.parametrize("threshold", [0.3, 1.0, 3.7, 5.0, 12.5, 33.0, 90.0])
@pytest.mark.parametrize("resolution", [Resolution(0.1, True), Resolution(0.5, False), Resolution(0.02, True)])
def test_finds_the_highest_passing_rate_within_the_resolution(threshold, resolution):
    passes, tried = scripted(threshold)
    seen = []
    result = rate_search(
        2.0, passes, resolution, maximum=1000, minimum=0.01, on_trial=lambda r, ok: seen.append((r, ok))
    )
    true_limit = threshold * 1.01  # where attainment crosses 99%
    low, high = result.largest_pass, result.smallest_fail
    assert low is not None and high is not None
    assert low <= true_limit < high
    assert resolution.met(low, high) or high - low <= 2e-4 * high  # rounding to 4 digits may stop it first
    assert len(tried) == len(set(tried)) and seen == result.tried and [r for r, _ in seen] == tried
    assert result.stopped == "resolution"


def test_brackets_by_doubling_then_bisects():
    passes, tried = scripted(10.0)
    rate_search(1.0, passes, Resolution(1.0, False), maximum=100, minimum=0.1)
    assert tried[:5] == [1, 2, 4, 8, 16]
    assert all(8 < r < 16 for r in tried[5:]) and tried[5] == 12


def test_halves_when_the_start_fails():
    passes, tried = scripted(1.5)
    result = rate_search(8.0, passes, Resolution(0.25, False), maximum=100, minimum=0.1)
    assert tried[:3] == [8, 4, 2] and tried[3] == 1
    assert result.largest_pass <= 1.515 < result.smallest_fail


def test_stops_at_the_maximum_and_the_minimum():
    passes, tried = scripted(1e9)
    result = rate_search(3.0, passes, Resolution(0.1, True), maximum=20, minimum=0.5)
    assert tried == [3, 6, 12, 20] and result.largest_pass == 20 and result.smallest_fail is None
    assert result.stopped == "maximum"
    passes, tried = scripted(0.01)
    result = rate_search(3.0, passes, Resolution(0.1, True), maximum=20, minimum=0.5)
    assert tried == [3, 1.5, 0.75] and result.largest_pass is None and result.stopped == "minimum"


@pytest.mark.parametrize(
    "text,expected", [("10%", Resolution(0.1, True)), ("0.5", Resolution(0.5, False)), (" 2 ", Resolution(2.0, False))]
)
def test_resolution_parses(text, expected):
    assert parse_resolution(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "abc", "%", "100%", "inf", "nan"])
def test_resolution_refuses(text):
    with pytest.raises(ValueError):
        parse_resolution(text)
