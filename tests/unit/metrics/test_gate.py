"""The CI gate's decision (metrics/gate.py): budgets parsed (signs, short names, whole claim names, bad input as
one GateInputError each), the change's interval from the two runs' own (MOVER, as compare), and the rule: FAIL
only when the whole interval is past the budget in the bad direction, UNDECIDED when only the value is, PASS
otherwise; a figure that cannot be judged is MISSING, failing the gate unless --missing pass."""

from __future__ import annotations

import math

import pytest

from loadproof.metrics.difference import mover_difference
from loadproof.metrics.gate import (
    DEFAULT_BUDGETS,
    DOWN,
    FAIL,
    FIGURES,
    MISSING,
    PASS,
    SUCCESS,
    SUCCESS_BUDGET,
    UNDECIDED,
    UP,
    Budget,
    Figure,
    GateInputError,
    check,
    decide,
    nothing_measured,
    parse_budgets,
    success_figure,
    with_derived,
    with_success,
)
from loadproof.metrics.intervals import Interval
from loadproof.metrics.precision import FIGURES as PRECISION_FIGURES
from loadproof.metrics.uncertainty import share_interval


def fig(value: float, low: float | None = None, high: float | None = None, confidence: float = 0.95) -> Figure:
    interval = None if low is None or high is None else Interval(low, high, confidence, "test")
    return Figure(value, "s", interval)


def test_budgets_parse_with_their_bad_direction():
    budgets = parse_budgets("ttft_p99=+10%, itl_p50=5, output_tokens_per_s=-5%,load.model.a.ttft_s.p50=+2.5%")
    assert [(b.figure, b.bad, b.limit) for b in budgets] == [
        ("ttft_p99", UP, pytest.approx(0.10)),
        ("itl_p50", UP, pytest.approx(0.05)),  # unsigned: the figure's own bad direction
        ("output_tokens_per_s", DOWN, pytest.approx(0.05)),
        ("load.model.a.ttft_s.p50", UP, pytest.approx(0.025)),
    ]
    assert [b.text for b in budgets] == ["+10%", "+5%", "-5%", "+2.5%"]
    assert budgets[0].claim("load") == "load.ttft_s.p99" and budgets[0].claim("replay") == "replay.ttft_s.p99"
    assert budgets[2].claim("load") == "load.output_tokens_per_s"
    assert budgets[3].claim("replay") == "load.model.a.ttft_s.p50"  # a whole claim name is itself


def test_every_precision_figure_is_a_budget_figure_and_the_defaults_parse():
    assert set(PRECISION_FIGURES) - {"attainment"} <= set(FIGURES)
    assert FIGURES["attainment"] == ("slo_attainment_pct", DOWN)
    assert [b.figure for b in parse_budgets(DEFAULT_BUDGETS)] == ["ttft_p50", "itl_p50", "output_tokens_per_s", SUCCESS]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ttft_p99", "FIGURE=+PCT%"),
        ("ttft_p99=", "FIGURE=+PCT%"),
        ("ttft_p99=fast", "not a percentage"),
        ("ttft_p99=+1e999%", "not a percentage"),
        ("ttft_p99=--10%", "not a percentage"),
        ("ttft_p99=-10%", "gets worse as it rises"),
        ("output_tokens_per_s=+5%", "gets worse as it falls"),
        ("ttft_p999=+10%", "unknown budget figure 'ttft_p999'"),
        ("load.ttft_s.p50=10%", "needs its sign"),
        ("ttft_p50=+10%,ttft_p50=+20%", "given twice"),
        (" , ", "no budget"),
    ],
)
def test_a_malformed_budget_says_what_is_wrong(text: str, says: str):
    with pytest.raises(GateInputError, match=says.replace("+", r"\+")):
        parse_budgets(text)


def test_the_change_and_its_interval_are_compares_mover_as_a_share_of_the_baseline():
    base, run = fig(1.0, 0.9, 1.1), fig(1.5, 1.4, 1.65)
    ch = check(Budget("ttft_p50", UP, 0.10), "load.ttft_s.p50", base, run)
    assert base.interval is not None and run.interval is not None
    diff = mover_difference(1.0, base.interval, 1.5, run.interval)
    assert diff is not None and ch.change == pytest.approx(0.5)
    assert ch.interval == (pytest.approx(diff.low), pytest.approx(diff.high))
    assert ch.decision == FAIL and "whole interval" in ch.reason  # [+35.9%, +68.0%] is past +10%


@pytest.mark.parametrize(
    ("run", "decision", "reason"),
    [
        (fig(1.30, 1.25, 1.35), FAIL, "whole interval"),  # +30%, interval wholly above +10%
        (fig(1.15, 1.05, 1.25), UNDECIDED, "at its value"),  # +15%, interval reaches back under +10%
        (fig(1.05, 1.02, 1.08), PASS, "worse, within"),  # real, within budget
        (fig(1.02, 0.95, 1.09), PASS, "not distinguishable"),
        (fig(0.80, 0.78, 0.82), PASS, "better"),  # far past the budget the good way: never a failure
    ],
)
def test_the_rule_on_a_latency(run: Figure, decision: str, reason: str):
    base = fig(1.0, 0.99, 1.01)
    ch = check(Budget("ttft_p50", UP, 0.10), "load.ttft_s.p50", base, run)
    assert ch.decision == decision and reason in ch.reason


def test_the_rule_on_a_rate_is_mirrored():
    base = Figure(100.0, "tokens/s", Interval(99.0, 101.0, 0.95, "test"))
    budget = Budget("output_tokens_per_s", DOWN, 0.05)
    fell = check(budget, "load.output_tokens_per_s", base, Figure(80.0, "tokens/s", Interval(79.0, 81.0, 0.95, "t")))
    rose = check(budget, "load.output_tokens_per_s", base, Figure(150.0, "tokens/s", Interval(149, 151, 0.95, "t")))
    assert fell.decision == FAIL and rose.decision == PASS and rose.reason == "better"


def test_a_zero_budget_fails_any_real_worsening_and_nothing_else():
    base = fig(1.0, 0.99, 1.01)
    budget = Budget("itl_p50", UP, 0.0)
    assert check(budget, "c", base, fig(1.03, 1.02, 1.04)).decision == FAIL
    assert check(budget, "c", base, fig(1.005, 0.99, 1.02)).decision == UNDECIDED  # worse at its value only
    assert check(budget, "c", base, fig(1.0, 0.99, 1.01)).decision == PASS


def test_an_interval_exactly_on_the_budget_is_not_past_it():
    # relative interval [+10%, ...]: its low bound is on the budget, not past it
    base = Figure(1.0, "s", Interval(1.0, 1.0, 0.95, "t"))
    ch = check(Budget("itl_p50", UP, 0.10), "c", base, Figure(1.2, "s", Interval(1.1, 1.3, 0.95, "t")))
    assert ch.interval is not None and math.isclose(ch.interval[0], 0.10)
    assert ch.decision == UNDECIDED


@pytest.mark.parametrize(
    ("base", "run", "reason"),
    [
        (None, fig(1.0, 0.9, 1.1), "not in the baseline"),
        (fig(1.0, 0.9, 1.1), None, "not in the run"),
        (fig(1.0, 0.9, 1.1), fig(1.0), "no interval in the run"),
        (fig(1.0), fig(1.0), "no interval in either run"),
        (fig(1.0, 0.9, 1.1, 0.95), fig(1.0, 0.9, 1.1, 0.90), "different confidences"),
        (fig(0.0, 0.0, 0.0), fig(1.0, 0.9, 1.1), "baseline of 0"),
    ],
)
def test_a_figure_that_cannot_be_judged_is_missing_and_says_why(base, run, reason):
    ch = check(Budget("ttft_p99", UP, 0.1), "load.ttft_s.p99", base, run)
    assert ch.decision == MISSING and reason in ch.reason


def test_missing_fails_the_gate_unless_asked_to_pass_and_something_else_was_judged():
    base = {"load.ttft_s.p50": fig(1.0, 0.9, 1.1), "load.ttft_s.p99": fig(2.0)}
    run = {"load.ttft_s.p50": fig(1.01, 0.91, 1.11), "load.ttft_s.p99": fig(2.1)}
    budgets = parse_budgets("ttft_p50=+10%,ttft_p99=+10%")
    closed = decide(base, run, "load", budgets)
    assert not closed.passed and [c.budget.figure for c in closed.failures] == ["ttft_p99"]
    opened = decide(base, run, "load", budgets, missing="pass")
    assert opened.passed and [c.decision for c in opened.checks] == [PASS, MISSING]
    nothing = decide(base, run, "load", parse_budgets("ttft_p99=+10%"), missing="pass")
    assert not nothing.passed and not nothing.failures and nothing.verdict == FAIL  # judged none: no pass


def test_a_budget_neither_run_has_is_bad_input_but_a_default_one_is_left_out():
    base = {"load.ttft_s.p50": fig(1.0, 0.9, 1.1)}
    run = {"load.ttft_s.p50": fig(1.0, 0.9, 1.1)}
    with pytest.raises(GateInputError, match="neither run has load.slo_attainment_pct"):
        decide(base, run, "load", parse_budgets("attainment=-1%"))
    decision = decide(base, run, "load", parse_budgets(DEFAULT_BUDGETS), defaults=True)
    assert [c.budget.figure for c in decision.checks] == ["ttft_p50"] and decision.passed
    with pytest.raises(GateInputError, match="no default budget applies to a capacity run"):
        decide({}, {}, "capacity", parse_budgets(DEFAULT_BUDGETS), defaults=True)
    with pytest.raises(GateInputError, match="--missing"):
        decide(base, run, "load", parse_budgets(DEFAULT_BUDGETS), missing="maybe")


def test_one_failure_fails_the_gate_an_undecided_figure_does_not():
    base = {"load.ttft_s.p50": fig(1.0, 0.99, 1.01), "load.itl_s.p50": fig(1.0, 0.99, 1.01)}
    run = {"load.ttft_s.p50": fig(1.15, 1.05, 1.25), "load.itl_s.p50": fig(1.0, 0.99, 1.01)}
    undecided = decide(base, run, "load", parse_budgets("ttft_p50=+10%,itl_p50=+10%"))
    assert undecided.passed and [c.decision for c in undecided.checks] == [UNDECIDED, PASS]
    run["load.itl_s.p50"] = fig(2.0, 1.98, 2.02)
    failed = decide(base, run, "load", parse_budgets("ttft_p50=+10%,itl_p50=+10%"))
    assert not failed.passed and [c.budget.figure for c in failed.failures] == ["itl_p50"]


def counts(requests: int, failed: int, scenario: str = "load") -> dict[str, Figure]:
    """A run's two counts as the gate reads them (claims without intervals, as every count is)."""
    return {
        f"{scenario}.requests": Figure(float(requests), "requests"),
        f"{scenario}.failed_requests": Figure(float(failed), "requests"),
    }


def test_budgets_in_percentage_points_parse_and_the_success_share_is_always_held():
    budgets = parse_budgets("success=-1pp,attainment=2.5pp,load.x_pct=-0.5pp,ttft_p50=+10%")
    assert [(b.figure, b.bad, b.limit, b.points) for b in budgets] == [
        (SUCCESS, DOWN, pytest.approx(1.0), True),
        ("attainment", DOWN, pytest.approx(2.5), True),
        ("load.x_pct", DOWN, pytest.approx(0.5), True),
        ("ttft_p50", UP, pytest.approx(0.10), False),
    ]
    assert [b.text for b in budgets] == ["-1pp", "-2.5pp", "-0.5pp", "+10%"]
    assert budgets[0].claim("replay") == "replay.success_pct"
    with pytest.raises(GateInputError, match="gets worse as it falls"):
        parse_budgets("success=+1pp")
    # budgets that do not name the success share get its default one, not given (left out where no counts)
    added = with_success(parse_budgets("ttft_p99=+10%"))
    assert [(b.figure, b.text, b.given) for b in added] == [("ttft_p99", "+10%", True), (SUCCESS, "-1pp", False)]
    assert SUCCESS_BUDGET in DEFAULT_BUDGETS
    for named in ("success=-5pp", "load.success_pct=-2pp"):
        assert [b.text for b in with_success(parse_budgets(named))] == [named.split("=")[1]]


def test_the_success_share_is_derived_from_the_counts_with_its_wilson_interval():
    share = success_figure(counts(300, 100), "load")
    assert share is not None and share.unit == "%" and share.value == pytest.approx(200 / 3)
    assert share.interval == share_interval(200, 300)
    assert share.interval is not None and share.interval.method == "Wilson score"
    assert success_figure(counts(300, 0), "replay") is None  # another scenario's counts
    assert success_figure({"load.requests": Figure(3.0)}, "load") is None  # no count of failures
    assert success_figure(counts(0, 0), "load") is None  # no request: no share
    assert "load.success_pct" in with_derived(counts(10, 1), "load")


def test_failures_past_the_budget_fail_the_gate_by_their_whole_interval():
    budgets = with_success(parse_budgets("ttft_p50=+10%"))  # the success share not named: held anyway
    base = {"load.ttft_s.p50": fig(1.0, 0.9, 1.1), **counts(300, 0)}
    run = {"load.ttft_s.p50": fig(1.0, 0.9, 1.1), **counts(300, 100)}
    failed = decide(base, run, "load", budgets)
    (success,) = [c for c in failed.checks if c.budget.figure == SUCCESS]
    assert success.claim == "load.success_pct" and success.decision == FAIL and not failed.passed
    assert success.change == pytest.approx(-100 / 3)  # in percentage points, not a share of the baseline
    assert success.interval is not None and success.interval[1] < -1.0  # the whole interval past -1 pp
    assert failed.nothing is None
    # the same counts again: not distinguishable
    same = decide(run, dict(run), "load", budgets)
    assert same.passed and [c.decision for c in same.checks] == [PASS, PASS]
    # one failure of 300 against a clean baseline: within the noise of 300 requests, never a failure
    one = decide(base, {**run, **counts(300, 1)}, "load", budgets)
    assert one.passed and one.checks[1].reason == "not distinguishable (its interval holds 0)"


def test_a_run_that_measured_nothing_fails_whatever_its_baseline():
    budgets = with_success(parse_budgets("ttft_p50=+10%"))
    base = {"load.ttft_s.p50": fig(1.0, 0.9, 1.1), **counts(300, 300)}  # a baseline that measured nothing too
    decision = decide(base, counts(300, 300), "load", budgets, missing="pass")
    assert decision.nothing == "the run measured nothing: none of its 300 requests succeeded"
    assert not decision.passed and decision.verdict == FAIL
    assert [c.decision for c in decision.checks] == [MISSING, PASS]  # 0% against 0%: no change, still a failure
    assert nothing_measured(counts(0, 0), "load") == "the run measured nothing: it sent no request"
    assert nothing_measured(counts(300, 299), "load") is None
    assert nothing_measured({}, "capacity") is None  # no count to tell


def test_percentage_points_are_for_a_figure_in_percent():
    base = {"load.ttft_s.p50": fig(1.0, 0.9, 1.1)}
    with pytest.raises(GateInputError, match=r"percentage points are for a figure in %; load.ttft_s.p50 is in s"):
        decide(base, base, "load", parse_budgets("load.ttft_s.p50=+1pp"))
    # a baseline of 0% is no obstacle to a change in points
    zero = decide(counts(300, 300), counts(300, 0), "load", parse_budgets("success=-1pp"))
    assert zero.checks[0].decision == PASS and zero.checks[0].reason == "better"
