"""A rate search decided on intervals (#41): a level passes on its pooled attainment's 95% Wilson lower
bound, fails on its upper bound, straddles in between and, its budget of segments spent, is UNDECIDED; the
search's claims (recomputed by `verify` through `judge_trials`) say each level's decision, the attainment's
interval at the rate found and the extra requests straddling levels cost. Synthetic trials, no engine."""

from __future__ import annotations

import pytest

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.intervals import wilson_interval
from loadproof.metrics.load_series import judge_trials, search_result
from loadproof.metrics.search_decision import decide, level_states, levels, min_requests_to_pass, rule_of


def trial(rate: float, good: int, requests: int, limited: bool = False) -> tuple[float, list[Claim]]:
    """A trial's (plan rate, claims) as `trial_of` gives them: what the decision reads."""
    claims = [
        fact("load.slo", "ttft <= 1 s", ""),
        count("load.requests", requests, "requests", "", direction="neither"),
        count("load.good_requests", good, "requests", "", direction="higher"),
        number("load.slo_attainment_pct", 100 * good / requests, "%", "", 2, direction="higher"),
        fact("load.client_limited", limited, ""),
    ]
    return rate, claims


@pytest.mark.parametrize(
    ("good", "requests", "decision"),
    [(60, 60, "pass"), (59, 60, "pass"), (20, 30, "fail"), (29, 30, "undecided"), (30, 30, "undecided")],
)
def test_a_level_passes_on_its_lower_bound_fails_on_its_upper_bound_and_straddles_between(good, requests, decision):
    got, interval = decide(good, requests, 0.9)
    assert got == decision
    assert (interval.low >= 0.9) is (decision == "pass") and (interval.high < 0.9) is (decision == "fail")
    assert interval.low <= good / requests <= interval.high


@pytest.mark.parametrize("target", [0.5, 0.9, 0.95, 0.99])
def test_the_fewest_requests_a_pass_takes_is_where_all_good_first_reaches_the_target(target):
    n = min_requests_to_pass(target)
    assert n is not None and wilson_interval(n, n).low >= target > wilson_interval(n - 1, n - 1).low
    assert decide(n, n, target)[0] == "pass" and decide(n - 1, n - 1, target)[0] != "pass"


def test_a_share_of_one_can_never_pass_on_an_interval():
    assert min_requests_to_pass(1.0) is None
    assert decide(10_000, 10_000, 1.0)[0] == "undecided"


def test_segments_pool_their_requests_and_a_client_limited_segment_fails_its_level():
    seg = {"requests": 30, "client_limited": False}
    states = level_states(
        [
            {**seg, "good_requests": 29, "slo_attainment_pct": 96.7},
            {**seg, "good_requests": 30, "slo_attainment_pct": 100.0},
        ],
        0.9,
    )
    assert [s.decision for s in states] == ["undecided", "pass"]
    assert (states[1].good, states[1].requests) == (59, 60) and "of 60" in states[1].reason
    assert states[1].interval_pct is not None and states[1].interval_pct.low >= 90
    limited = level_states([{**seg, "good_requests": 30, "slo_attainment_pct": 100.0, "client_limited": True}], 0.5)
    assert limited[0].decision == "fail" and "client-limited" in limited[0].reason
    assert (
        level_states([{"requests": None, "good_requests": None, "slo_attainment_pct": None}], 0.9)[0].decision == "fail"
    )


def test_consecutive_trials_at_one_rate_are_one_level():
    assert levels([1.0, 2.0, 2.0, 4.0, 3.0, 3.0, 3.0]) == [0, 1, 1, 2, 3, 3, 3]
    assert (rule_of("interval"), rule_of(None), rule_of("anything")) == ("interval", "point", "point")


# levels at target 90%: 1 passes at once; 2 straddles, then passes pooled; 4 fails; 3 straddles three times
# (the budget) and stays undecided
SEARCH = [
    trial(1, 60, 60),
    trial(2, 29, 30),
    trial(2, 30, 30),
    trial(4, 20, 30),
    trial(3, 27, 30),
    trial(3, 27, 30),
    trial(3, 27, 30),
]


def test_the_search_on_intervals_says_each_levels_decision_its_interval_and_the_extra_requests():
    rows, claims = judge_trials(SEARCH, 0.9, rule="interval")
    by = {c.name: c for c in claims}
    assert [(r.level, r.segment, r.decision) for r in rows] == [
        (0, 0, "pass"),
        (1, 0, "undecided"),
        (1, 1, "pass"),
        (2, 0, "fail"),
        (3, 0, "undecided"),
        (3, 1, "undecided"),
        (3, 2, "undecided"),
    ]
    assert by["load.search.decision"].value == "interval"
    assert by["load.search.max_rate_rps"].value == 2 and by["load.search.min_failing_rate_rps"].value == 3
    found = by["load.search.attainment_pct"]
    assert found.value == pytest.approx(100 * 59 / 60) and found.interval is not None
    assert found.interval.low >= 90 and found.interval.method == "Wilson score"
    decisions = {r: by[f"load.search.level.{r}.decision"].value for r in ("1", "2", "4", "3")}
    assert decisions == {"1": "pass", "2": "pass", "4": "fail", "3": "undecided"}
    assert by["load.search.level.3.requests"].value == 90 and by["load.search.level.2.requests"].value == 60
    assert by["load.search.extra_requests"].value == 30 + 60  # rate 2's second segment, rate 3's second and third
    assert by["load.search.undecided_levels"].value == 1
    said = search_result(claims, rows)
    assert said.startswith("highest rate meeting the SLO: 2.0000 requests/s (attainment 98.33% [")
    assert "3.0000 requests/s is UNDECIDED" in said and "not a pass" in said and "90 extra requests" in said


def test_an_undecided_level_is_never_a_pass_and_the_point_rule_keeps_the_old_claims():
    rows, claims = judge_trials([trial(1, 29, 30), trial(1, 29, 30)], 0.9, rule="interval")
    by = {c.name: c for c in claims}
    assert not any(r.passed for r in rows) and "load.search.max_rate_rps" not in by
    said = search_result(claims, rows)
    assert "no rate met the SLO" in said and "1 undecided" in said
    assert "fewer requests than" not in said  # 60 requests: enough to pass, had they all been good
    rows, claims = judge_trials([trial(0.5, 10, 10), trial(0.5, 10, 10)], 0.9, rule="interval")
    said = search_result(claims, rows)  # 20 of 20 good straddles: 35 is the fewest that can pass 90%
    assert said.endswith(
        "; 1 of them had fewer requests than the 35 a pass takes, even all good: raise -n or "
        "--duration-s, or --search-segments"
    )
    # the same attainment on the point value: 96.7% >= 90%, each trial its own level, no interval claims
    rows, claims = judge_trials([trial(1, 29, 30), trial(2, 20, 30)], 0.9)
    names = {c.name for c in claims}
    assert [r.passed for r in rows] == [True, False] and all(r.decision is None for r in rows)
    assert "load.search.decision" not in names and "load.search.extra_requests" not in names
    assert search_result(claims, rows) == "highest rate meeting the SLO: 1.0000 requests/s; 2.0000 requests/s fails"


def test_every_claim_of_a_search_on_intervals_has_its_formula_in_the_docs():
    from tests.unit.metrics.test_docs_formulas import docs_text, undocumented

    _, claims = judge_trials(SEARCH, 0.9, interrupted=True, rule="interval")
    _, found = judge_trials(SEARCH, 0.9, rule="interval")
    assert undocumented(claims + found, docs_text()) == []
