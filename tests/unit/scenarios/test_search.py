"""The search strategy against a known threshold: brackets, bisects, never tries a value twice."""

import pytest

from loadproof.scenarios.search import Trial, search


def threshold_trials(limit: int):
    tried: list[int] = []

    def run(value: int) -> Trial:
        tried.append(value)
        return Trial(value, "PASS" if value <= limit else "FAIL", "", f"t{value}")

    return run, tried


@pytest.mark.parametrize("limit", [1, 3, 4, 5, 7, 24, 31])
def test_finds_the_largest_passing_value(limit):
    run, tried = threshold_trials(limit)
    result = search("sessions", 1, 64, run)
    assert result.largest_pass == limit and result.smallest_fail == limit + 1
    assert len(tried) == len(set(tried))
    assert [t.value for t in result.trials] == tried


def test_everything_passes_up_to_the_maximum():
    run, tried = threshold_trials(1000)
    result = search("sessions", 2, 12, run)
    assert result.largest_pass == 12 and result.smallest_fail is None
    assert tried == [2, 4, 8, 12]


def test_nothing_passes():
    run, _ = threshold_trials(0)
    result = search("sessions", 1, 8, run)
    assert result.largest_pass is None and "no sessions passed" in result.summary


def test_resolution_stops_bisection_early():
    run, tried = threshold_trials(5000)
    result = search("input_tokens", 1024, 32768, run, resolution=256)
    assert result.largest_pass <= 5000 < result.smallest_fail
    assert result.smallest_fail - result.largest_pass <= 256
