"""The search strategy against a known threshold: brackets, bisects, never tries a value twice."""

import pytest

from loadproof.scenarios.search import SearchResult, Trial, search


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


def test_a_largest_pass_nothing_above_failed_is_a_lower_bound_said_first():
    run, _ = threshold_trials(1000)
    result = search("sessions", 2, 12, run)
    assert result.lower_bound
    assert result.summary == (
        "a lower bound, not a result: the largest passing sessions is at least 12 (every value tried passed, up "
        "to the maximum 12; raise --search-max to find where it fails)"
    )
    bracketed = search("sessions", 1, 64, threshold_trials(5)[0])
    assert not bracketed.lower_bound and bracketed.summary == "largest passing sessions: 5, 6 fails"


def test_an_interrupted_search_gives_a_lower_bound_from_its_finished_trials():
    trials = [Trial(1, "PASS", "", "t1"), Trial(2, "PASS", "", "t2"), Trial(4, "FAIL", "", "t4")]
    result = SearchResult.of("sessions", trials, 64, interrupted=True)
    assert (result.largest_pass, result.smallest_fail, result.lower_bound) == (2, 4, True)
    assert result.summary == (
        "search interrupted after 3 finished trial(s): a lower bound, not a result: the largest passing sessions "
        "is at least 2, below 4 (a trial failed there) (the search did not finish)"
    )
    nothing = SearchResult.of("sessions", [], 64, interrupted=True)
    assert nothing.summary == "search interrupted after 0 finished trial(s): no sessions passed (smallest tried: -)"
