"""`loadproof compare` of one run a side: each claim's own interval (claims.json's `interval`) combined into the
difference's (MOVER), `not distinguishable` where it holds 0, by how much with the interval where it does not,
better or worse by the claim's direction, never a regression when not distinguishable; a claim without an
interval compared as measured, and said to be.

Expected bounds are worked out here from the intervals the synthetic claims were given."""

import math
from pathlib import Path

import pytest

from loadproof.metrics.claims import number
from loadproof.metrics.intervals import Interval
from loadproof.report.compare import build_side, compare, tally
from loadproof.report.compare_headline import key_lines, tally_lines
from loadproof.report.compare_markdown import render_markdown
from tests import rundir_values as rv
from tests.unit.report.synthetic import stream, throughput_plan

TTFT = "throughput.x.c1.ttft_median_s"  # lower is better
TPS = "throughput.x.c1.decode_tokens_per_s"  # higher is better
PLAN = throughput_plan([stream("x", send=0, first=0.1, rate=10, family="x")])


def figure(name, value, low=None, high=None, confidence=0.95):
    unit, direction = ("s", "lower") if name == TTFT else ("tokens/s", "higher")
    interval = None if low is None else Interval(low, high, confidence, "order statistics (synthetic)")
    return number(name, value, unit, "f", 4, direction=direction, interval=interval)


def side(label, *claims):
    """One run whose claims (as claims.json holds them) are the given ones."""
    run = rv.run_of(Path(label), {"run_id": label, "scenario": "throughput", **PLAN})
    return build_side(label, [run], lambda _run: list(claims))


def test_two_runs_alike_are_not_distinguishable():
    base = side("a", figure(TTFT, 0.100, 0.090, 0.110), figure(TPS, 50.0, 48.0, 52.0))
    cand = side("b", figure(TTFT, 0.103, 0.093, 0.113), figure(TPS, 49.0, 47.0, 51.5))
    result = compare(cand, [base], max_slowdown=0.01)
    ttft = result.baselines[0].changes[TTFT]
    # d = +0.003; low = d - hypot(0.010, 0.010), high = d + hypot(0.010, 0.010)
    assert ttft.diff_ci == pytest.approx((0.003 - math.hypot(0.01, 0.01), 0.003 + math.hypot(0.01, 0.01)))
    assert ttft.ci == pytest.approx((ttft.diff_ci[0] / 0.1, ttft.diff_ci[1] / 0.1))
    assert ttft.basis == "within runs" and ttft.distinguishable is False and ttft.judgement == ""
    counts = tally(result.baselines[0])
    assert counts.differ == [] and sorted(counts.not_distinguishable) == [TPS, TTFT]
    # +3% latency and -2% throughput are over the 1% budget at their value, but not told from noise
    assert result.verdict == "ACCEPT" and result.reasons == []
    assert any(n.startswith(f"{TTFT}: +3.0% [-11.1%, +17.1%] vs B1, over the budget") for n in result.notes)
    assert tally_lines(result) == ["vs B1, 95% intervals within runs: 0 figures differ, 2 not distinguishable"]
    line = next(line for line in key_lines(result) if TTFT in line)
    assert line.endswith("not distinguishable: +3.0% [-11.1%, +17.1%]")
    text = render_markdown(result)
    assert "(worse)" not in text and "(better)" not in text
    assert f"- `{TTFT}`: not distinguishable: +3.0% [-11.1%, +17.1%]; +0.0030 [-0.0111, 0.0171]" in text


def test_a_shifted_run_differs_by_how_much_with_its_interval():
    base = side("a", figure(TTFT, 0.100, 0.095, 0.105))
    cand = side("b", figure(TTFT, 0.080, 0.076, 0.085))
    result = compare(cand, [base])
    ch = result.baselines[0].changes[TTFT]
    low, high = -0.02 - math.hypot(0.004, 0.005), -0.02 + math.hypot(0.005, 0.005)
    assert ch.diff_ci == pytest.approx((low, high)) and ch.ci == pytest.approx((low / 0.1, high / 0.1))
    assert ch.distinguishable and ch.judgement == "better"  # lower latency
    assert tally_lines(result) == [
        "vs B1, 95% intervals within runs: 1 figure differs (1 better, 0 worse), 0 not distinguishable"
    ]
    assert any(line.endswith("20.0% lower [-26.4%, -12.9%] (better)") for line in key_lines(result))
    said = "the candidate is 20.0% lower than B1 [-26.4%, -12.9%]; -0.0200 [-0.0264, -0.0129] (better)"
    assert f"- `{TTFT}`: {said}" in render_markdown(result)


def test_the_claims_direction_says_better_or_worse_and_a_real_slowdown_rejects():
    base = side("a", figure(TPS, 50.0, 49.0, 51.0), figure(TTFT, 0.100, 0.095, 0.105))
    cand = side("b", figure(TPS, 40.0, 39.0, 41.0), figure(TTFT, 0.120, 0.115, 0.125))
    result = compare(cand, [base], max_slowdown=0.10)
    changes = result.baselines[0].changes
    assert changes[TPS].judgement == "worse" and changes[TTFT].judgement == "worse"  # lower rate, higher latency
    assert result.verdict == "REJECT" and len(result.reasons) == 2
    reason = next(r for r in result.reasons if r.startswith(TPS))
    assert reason.startswith(f"{TPS}: -20.0% [-22.8%, -17.2%] vs a (throughput worse than the 10% budget")
    assert tally(result.baselines[0]).worse == [TPS, TTFT]


def test_a_claim_without_an_interval_on_one_side_is_compared_as_measured():
    base = side("a", figure(TTFT, 0.100), figure(TPS, 50.0, 48.0, 52.0))
    cand = side("b", figure(TTFT, 0.150, 0.140, 0.160), figure(TPS, 51.0, 49.0, 53.0))
    result = compare(cand, [base], max_slowdown=0.10)
    ttft = result.baselines[0].changes[TTFT]
    assert ttft.ci is None and ttft.basis is None and ttft.missing == "no interval in the baseline"
    assert ttft.judgement == "worse" and result.verdict == "REJECT"  # as before intervals: on its value
    counts = tally(result.baselines[0])
    assert counts.without == [TTFT] and counts.not_distinguishable == [TPS]
    assert tally_lines(result) == [
        "vs B1, 95% intervals within runs: 0 figures differ, 1 not distinguishable, 1 without an interval (as measured)"
    ]
    assert any(line.endswith("+50.0% (worse); no interval in the baseline") for line in key_lines(result))


def test_intervals_at_different_confidences_are_not_combined():
    base = side("a", figure(TTFT, 0.100, 0.095, 0.105, confidence=0.90))
    cand = side("b", figure(TTFT, 0.080, 0.076, 0.085))
    ch = compare(cand, [base]).baselines[0].changes[TTFT]
    assert ch.ci is None and ch.missing == "intervals at different confidences"


def test_repeated_runs_keep_the_interval_across_runs():
    """Two runs a side: the across-run bootstrap, not the runs' own intervals, even where they carry one."""

    def runs(label, values):
        made = [
            rv.run_of(Path(f"{label}{i}"), {"run_id": f"{label}{i}", "scenario": "throughput", **PLAN})
            for i in range(len(values))
        ]
        claims = {f"{label}{i}": [figure(TTFT, v, v - 0.001, v + 0.001)] for i, v in enumerate(values)}
        return build_side(label, made, lambda run: claims[run.run_id])

    result = compare(runs("b", [0.100, 0.130]), [runs("a", [0.100, 0.101])])
    ch = result.baselines[0].changes[TTFT]
    assert ch.basis == "across runs" and ch.diff_ci is None
    # within runs, +14.9% would be told apart by intervals of +-1%; across runs two repeats a side cannot
    assert tally_lines(result)[0].startswith("vs B1, 95% intervals across runs:")
    assert "bootstrap interval across runs" in render_markdown(result)
    assert not any("Intervals within runs" in n for n in result.notes)


def test_an_unchanged_figure_with_intervals_reads_not_distinguishable_with_its_interval():
    base = side("a", figure(TPS, 50.0, 45.0, 55.0))
    cand = side("b", figure(TPS, 50.0, 45.0, 55.0))
    result = compare(cand, [base])
    assert tally(result.baselines[0]).not_distinguishable == [TPS]
    half = math.hypot(5.0, 5.0) / 50.0  # 14.1%
    assert any(line.endswith(f"not distinguishable: 0.0% [-{half:.1%}, +{half:.1%}]") for line in key_lines(result))
