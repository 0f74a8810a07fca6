"""`loadproof compare`: changes against every baseline, budgets, failed candidates, bootstrap intervals.

Expected changes are worked out here from the rates the synthetic runs were built with, not read back
from the code under test.
"""

import random
import subprocess
import sys
import types
from pathlib import Path

import pytest

from loadproof.errors import UsageError
from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Criterion, acceptance_claims, count, number
from loadproof.report.compare import (
    DESCRIPTIVE,
    NO_VERDICT,
    add_answer_changes,
    bootstrap_change_ci,
    budget_of,
    build_side,
    compare,
    parse_percent,
)
from loadproof.report.compare_markdown import render_markdown, table
from loadproof.store.run_dir import load_run
from tests import rundir_values as rv
from tests.unit.report.synthetic import stream, throughput_plan, throughput_run, write_run

DECODE = "throughput.english.c1.decode_tokens_per_s"
TTFT = "throughput.english.c1.ttft_median_s"


def side(tmp_path, label, rates):
    return build_side(label, [load_run(throughput_run(tmp_path, label, rates))], compute_claims)


PLANS = {  # the smallest plan of each scenario these tests build sides of
    "throughput": throughput_plan([stream("x", send=0, first=0.1, rate=10, family="x")]),
    "capacity": {
        "plan": {
            "sessions": [{"request_id": "cap-s0", "session_id": "s0", "expected": "1234567"}],
            "input_tokens": 1024,
            "window_s": 6.0,
            "max_gap_s": 5.0,
            "drain_timeout_s": 30.0,
            "kv_idle_bound": 0.02,
        }
    },
    "soak": {
        "plan": {
            "duration_s": 20.0,
            "clients": 2,
            "long_every": 0,
            "long_requests": False,
            "max_error_rate": 0.0,
            "max_latency_drift": 0.25,
            "max_rss_growth_mib": 512,
        }
    },
    "quality": {
        "plan": {"suites": ["gsm8k"], "endpoint": "chat", "max_model_len": None, "num_items": 5, "num_skipped": 0}
    },
}


def claim_side(label, claims, scenario="capacity", **plan):
    """A side whose claims are given directly (for verdicts and exact budget figures)."""
    planned = {**PLANS[scenario], "plan": {**PLANS[scenario]["plan"], **plan}}
    run = rv.run_of(Path(label), {"run_id": label, "scenario": scenario, **planned})
    return build_side(label, [run], lambda _run: claims)


def tps(value, name="throughput.x.c1.decode_tokens_per_s"):
    return number(name, value, "tokens/s", "f", direction="higher")


def test_change_against_every_baseline_side_by_side(tmp_path):
    base, other, cand = side(tmp_path, "base", [10.0]), side(tmp_path, "other", [20.0]), side(tmp_path, "cand", [15.0])
    result = compare(cand, [base, other])
    expected = {"base": (15.0 - 10.0) / 10.0, "other": (15.0 - 20.0) / 20.0}  # +50%, -25%
    for bc in result.baselines:
        assert bc.changes[DECODE].change == pytest.approx(expected[bc.baseline.label], rel=1e-6)
    header, rows = table(result)
    assert header[3:] == ["B1", "change vs B1", "B2", "change vs B2"]
    row = next(r for r in rows if r[0] == DECODE)
    assert row[4] == "+50.0% (better)" and row[6] == "-25.0% (worse)"  # neither baseline dropped
    text = render_markdown(result)
    assert "B1: base" in text and "B2: other" in text
    assert result.verdict == "ACCEPT"


def test_single_sequential_runs_are_labelled_descriptive(tmp_path):
    result = compare(side(tmp_path, "cand", [11.0]), [side(tmp_path, "base", [10.0])])
    assert all(ch.ci is None for bc in result.baselines for ch in bc.changes.values())
    assert DESCRIPTIVE in render_markdown(result)
    assert "95% CI" not in render_markdown(result)


def test_repeats_in_one_run_give_means_and_an_interval(tmp_path):
    base = side(tmp_path, "base", [10.0, 10.2, 9.8, 10.1])
    cand = side(tmp_path, "cand", [12.0, 12.3, 11.8, 12.1])
    assert len(base.samples[DECODE]) == 4  # the run was split by `repeat`
    result = compare(cand, [base])
    ch = result.baselines[0].changes[DECODE]
    assert ch.change == pytest.approx((12.05 - 10.025) / 10.025, rel=1e-6)  # means over repeats
    assert ch.ci is not None and ch.ci[0] > 0 and ch.distinguishable and ch.basis == "across runs"
    text = render_markdown(result)
    assert DESCRIPTIVE not in text and "95% CI vs B1" in text and "bootstrap interval across runs" in text
    assert f"`{DECODE}`: the candidate is 20.2% higher than B1" in text


def test_comma_separated_runs_are_repeats_of_one_side(tmp_path):
    runs = [load_run(throughput_run(tmp_path, f"b{i}", [rate])) for i, rate in enumerate([10.0, 11.0, 12.0])]
    base = build_side("b0,b1,b2", runs, compute_claims)
    assert base.samples[DECODE] == pytest.approx([10.0, 11.0, 12.0], rel=1e-6)
    assert base.value(DECODE) == pytest.approx(11.0, rel=1e-6)


def test_bootstrap_is_deterministic_for_a_seed():
    base, cand = [10.0, 10.4, 9.7, 10.1, 9.9], [10.3, 10.8, 10.0, 10.6, 10.2]
    one = bootstrap_change_ci(base, cand, random.Random(7), 2000)
    assert one == bootstrap_change_ci(base, cand, random.Random(7), 2000)
    assert one != bootstrap_change_ci(base, cand, random.Random(8), 2000)


def test_bootstrap_excludes_zero_for_clearly_different_samples():
    low, high = bootstrap_change_ci(
        [10.0, 10.2, 9.9, 10.1, 10.05], [12.0, 12.1, 11.9, 12.2, 12.05], random.Random(1), 2000
    )
    assert 0 < low < 0.2 < high < 0.25  # the true change is +20%


def test_bootstrap_includes_zero_for_identical_distributions():
    values = [10.0, 11.0, 9.0, 10.5, 9.5, 10.2]
    low, high = bootstrap_change_ci(values, list(values), random.Random(1), 2000)
    assert low < 0 < high


def test_bootstrap_needs_two_values_on_each_side():
    assert bootstrap_change_ci([10.0], [11.0, 12.0], random.Random(1)) is None


def budget_sides(cand_tps, cand_ttft):
    base = claim_side(
        "base", [tps(100.0), number("throughput.x.c1.ttft_median_s", 1.0, "s", "f", 3, direction="lower")], "throughput"
    )
    cand = claim_side(
        "cand",
        [tps(cand_tps), number("throughput.x.c1.ttft_median_s", cand_ttft, "s", "f", 3, direction="lower")],
        "throughput",
    )
    return base, cand


@pytest.mark.parametrize(
    ("tps", "ttft", "verdict", "culprit"),
    [
        (90.0, 1.0, "ACCEPT", None),  # throughput exactly 10% worse: within budget
        (89.5, 1.0, "REJECT", "decode_tokens_per_s: -10.5%"),
        (150.0, 1.0, "ACCEPT", None),  # better is never rejected
        (100.0, 1.10, "ACCEPT", None),  # latency exactly 10% worse
        (100.0, 1.105, "REJECT", "ttft_median_s: +10.5%"),
        (100.0, 0.5, "ACCEPT", None),
    ],
)
def test_max_slowdown_on_both_sides_of_the_threshold(tps, ttft, verdict, culprit):
    base, cand = budget_sides(tps, ttft)
    result = compare(cand, [base], max_slowdown=parse_percent("10%"))
    assert result.verdict == verdict
    if culprit:
        assert any(culprit in r and "vs base" in r for r in result.reasons)


def test_max_slowdown_against_any_baseline():
    slow, _ = budget_sides(100.0, 1.0)
    fast = claim_side("fast", [tps(130.0)], "throughput")
    _, cand = budget_sides(105.0, 1.0)
    result = compare(cand, [slow, fast], max_slowdown=0.10)
    assert result.verdict == "REJECT"
    assert len(result.reasons) == 1 and "vs fast" in result.reasons[0] and "-19.2%" in result.reasons[0]


@pytest.mark.parametrize(
    ("base_tps", "cand_tps"),
    [
        (12.5, 12.5),  # unchanged
        (0.1 + 0.2, 0.3),  # a mean over repeats that differs in its last bits: -1.9e-16
        (10_000.0, 9_999.9),  # -0.001%: below the 0.1% the change is printed at
        (10_000.0, 10_000.1),
    ],
)
def test_a_change_that_rounds_to_zero_reads_same_and_is_never_judged(base_tps, cand_tps):
    base = claim_side("base", [tps(base_tps)], "throughput")
    cand = claim_side("cand", [tps(cand_tps)], "throughput")
    result = compare(cand, [base], max_slowdown=0.0)
    _, rows = table(result)
    row = next(r for r in rows if r[0] == "throughput.x.c1.decode_tokens_per_s")
    assert row[4] == "0.0% (same)"  # never -0.0%, never (worse) or (better)
    assert result.verdict == "ACCEPT"  # not worse than even a 0% budget: the table shows no change


def capacity_claims(verdict, aggregate):
    status = "FAIL" if verdict == "FAIL" else "PASS"
    criteria = [
        Criterion("all_streams_started", "PASS", "4/4 sessions produced a first token"),
        Criterion("running", status, "num_requests_running min 3, max 4 (want 4)"),
    ]
    return [tps(aggregate, "capacity.window_aggregate_tokens_per_s")] + acceptance_claims("capacity", criteria)


def test_a_failing_candidate_is_rejected_with_its_failure_and_kept_in_the_table():
    base = claim_side("base", capacity_claims("PASS", 100.0))
    cand = claim_side("cand", capacity_claims("FAIL", 120.0))
    result = compare(cand, [base])
    assert result.verdict == "REJECT"
    assert result.reasons == [
        "capacity.verdict FAIL in candidate run cand: running: num_requests_running min 3, max 4 (want 4)"
    ]
    assert result.names == ["capacity.window_aggregate_tokens_per_s"]  # its figures are still compared
    assert "- REJECT: capacity.verdict FAIL" in render_markdown(result)


def test_require_an_acceptance():
    base = claim_side("base", capacity_claims("PASS", 100.0))
    assert (
        compare(claim_side("cand", capacity_claims("PASS", 100.0)), [base], required=["capacity"]).verdict == "ACCEPT"
    )
    no_verdict = claim_side("cand", [tps(100.0, "capacity.window_aggregate_tokens_per_s")])
    result = compare(no_verdict, [base], required=["capacity"])
    assert result.verdict == "REJECT" and "has no capacity.verdict claim" in result.reasons[0]


def test_a_failed_baseline_is_noted_not_rejected():
    result = compare(
        claim_side("cand", capacity_claims("PASS", 100.0)), [claim_side("base", capacity_claims("FAIL", 90.0))]
    )
    assert result.verdict == "ACCEPT"
    assert any("baseline run base failed its acceptance" in n for n in result.notes)


def test_no_shared_claim_is_an_input_error(tmp_path):
    cand = side(tmp_path, "cand", [10.0])
    other = claim_side("soak", [count("soak.requests", 10, "requests", "f", direction="neither")], "soak")
    with pytest.raises(UsageError, match="no shared claim between soak"):
        compare(cand, [other], anyway=True)


def test_direction_and_budget_come_from_the_claim_not_its_name():
    assert budget_of(number("any.name.at_all", 1.0, "tokens/s", "f", direction="higher")) == "throughput"
    assert budget_of(number("throughput.x.c1.ttft_median_s", 1.0, "s", "f", direction="lower")) == "latency"
    assert budget_of(number("capacity.window_s", 6.0, "s", "f", direction="neither")) is None  # a setting
    assert budget_of(number("quality.gsm8k.accuracy", 0.5, "fraction", "f", direction="higher")) is None
    assert budget_of(count("throughput.x.c1.failed_requests", 1, "requests", "f", direction="lower")) is None
    # a quality score named like nothing in particular is judged by its own direction
    base = claim_side(
        "base", [number("quality.new_suite.score", 0.50, "fraction", "f", 3, direction="higher")], "quality"
    )
    cand = claim_side(
        "cand", [number("quality.new_suite.score", 0.40, "fraction", "f", 3, direction="higher")], "quality"
    )
    result = compare(cand, [base])
    assert result.baselines[0].changes["quality.new_suite.score"].judgement == "worse"
    assert table(result)[1][0][1] == "higher"


def test_runs_of_different_scenarios_are_refused_in_one_line(tmp_path):
    cand = side(tmp_path, "cand", [10.0])
    capacity = claim_side("cap", capacity_claims("PASS", 100.0))
    with pytest.raises(UsageError) as refused:
        compare(cand, [capacity])
    message = str(refused.value)
    assert "cap is a capacity run, cand a throughput run" in message and "--anyway" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        (
            "sessions",
            [{"request_id": f"cap-s{i}", "session_id": f"s{i}", "expected": "1"} for i in range(8)],
            "sessions 8 vs 1",
        ),
        ("input_tokens", 2048, "input_tokens 2048 vs 1024"),
        ("window_s", 10.0, "window_s 10 vs 6"),
    ],
)
def test_runs_with_a_different_workload_are_refused_unless_asked(field, value, said):
    base = claim_side("base", capacity_claims("PASS", 100.0), **{field: value})
    cand = claim_side("cand", capacity_claims("PASS", 110.0))
    with pytest.raises(UsageError, match=f"not compared, the runs differ: base vs cand: {said}; pass --anyway"):
        compare(cand, [base])
    result = compare(cand, [base], anyway=True)  # asked: compared, and said how they differ
    assert result.differences == [f"base vs cand: {said}"]
    assert f"runs differ, compared anyway: base vs cand: {said}" in render_markdown(result)


def test_repeats_of_one_side_must_share_the_workload():
    one = claim_side("r1", capacity_claims("PASS", 100.0))
    other = claim_side("r2", capacity_claims("PASS", 100.0), input_tokens=4096)
    both = build_side("r1,r2", one.runs + other.runs, lambda run: capacity_claims("PASS", 100.0))
    with pytest.raises(UsageError, match=r"r1,r2 \(r2\) vs cand: input_tokens 4096 vs 1024"):
        compare(claim_side("cand", capacity_claims("PASS", 100.0)), [both])


def test_throughput_families_and_concurrency_are_part_of_the_workload(tmp_path):
    base = side(tmp_path, "base", [10.0])
    cand = build_side(
        "cand", [load_run(throughput_run(tmp_path, "cand", [10.0], families=("english", "code")))], compute_claims
    )
    with pytest.raises(UsageError, match="families english vs english,code"):
        compare(cand, [base])


def test_no_verdict_without_a_shared_figure_a_budget_applies_to():
    score = [count("quality.gsm8k.correct", 10, "items", "f", direction="higher")]
    result = compare(claim_side("cand", score, "quality"), [claim_side("base", score, "quality")])
    assert result.verdict == NO_VERDICT
    assert result.reasons == ["no shared figure a budget applies to (a figure in tokens/s or s with a direction)"]
    assert "## Decision: NO VERDICT" in render_markdown(result)
    # a failed acceptance still rejects: that needs no figure
    sessions = [count("capacity.sessions", 4, "sessions", "N", direction="neither")]
    failed = compare(
        claim_side("cand", sessions + acceptance_claims("capacity", [Criterion("running", "FAIL", "3")])),
        [claim_side("base", sessions + acceptance_claims("capacity", [Criterion("running", "PASS", "4")]))],
    )
    assert failed.verdict == "REJECT" and failed.reasons == ["capacity.verdict FAIL in candidate run cand: running: 3"]


def test_parse_percent():
    assert parse_percent("10%") == pytest.approx(0.10)
    assert parse_percent("2.5") == pytest.approx(0.025)
    with pytest.raises(UsageError, match="percentage"):
        parse_percent("ten")


def test_quality_answers_listed_per_baseline(monkeypatch):
    seen = []

    def answer_changes(base, cand):
        seen.append((base.run_id, cand.run_id))
        return {
            "same_answer": ["q1"],
            "fixed_errors": [],
            "new_errors": [
                {"suite": "gsm8k", "item_id": "q7", "mode": "", "expected": "3", "base": "3", "candidate": "4"}
            ],
        }

    monkeypatch.setitem(sys.modules, "loadproof.metrics.quality", types.SimpleNamespace(answer_changes=answer_changes))
    score = [count("quality.gsm8k.correct", 10, "items", "f", direction="higher")]
    result = compare(
        claim_side("cand", score, "quality"), [claim_side("b1", score, "quality"), claim_side("b2", score, "quality")]
    )
    add_answer_changes(result)
    assert seen == [("b1", "cand"), ("b2", "cand")]
    text = render_markdown(result)
    assert "Against b1:" in text and "Against b2:" in text and "| new_errors | 1 | gsm8k/q7: 3 -> 4 |" in text
    assert "| same_answer | 1 | q1 |" in text


def test_cli_exit_codes(tmp_path):
    base = throughput_run(tmp_path, "base", [10.0])
    cand = throughput_run(tmp_path, "cand", [8.0])
    soak = write_run(
        tmp_path,
        "soak",
        "soak",
        [stream("s0", send=0, first=0.1, rate=10, scenario="soak", family="short")],
        PLANS["soak"],
    )
    soak2 = write_run(
        tmp_path,
        "soak2",
        "soak",
        [stream("s1", send=0, first=0.1, rate=12, scenario="soak", family="short")],
        PLANS["soak"],
    )

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "loadproof", "compare", *map(str, args)], capture_output=True, text=True, timeout=60
        )

    out = tmp_path / "cmp.md"
    rejected = run(base, cand, "--max-slowdown", "10%", "--out", out)
    assert rejected.returncode == 1, rejected.stderr
    assert "REJECT" in rejected.stdout and "-20.0%" in out.read_text()
    accepted = run(base, cand, "--max-slowdown", "25")
    assert accepted.returncode == 0, accepted.stderr
    refused = run(base, soak)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"not compared, the runs differ: {base} is a throughput run, {soak} a soak run" in refused.stderr
    assert "--anyway" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    anyway = run(base, soak, "--anyway")
    assert anyway.returncode == 2 and "no shared claim" in anyway.stderr
    no_verdict = run(soak, soak2)  # soak latency only with two halves: nothing a budget applies to is shared
    assert no_verdict.returncode == 2, no_verdict.stdout + no_verdict.stderr
    assert "NO VERDICT" in no_verdict.stdout and "ACCEPT" not in no_verdict.stdout
    assert "no verdict: no shared figure a budget applies to" in no_verdict.stderr


def test_repeats_on_one_side_only_stay_descriptive(tmp_path):
    result = compare(side(tmp_path, "cand", [11.0]), [side(tmp_path, "base", [10.0, 10.5, 9.5])])
    text = render_markdown(result)
    assert "descriptive: a single run on one side, no confidence interval" in text and "95% CI" not in text
    assert result.baselines[0].changes[DECODE].change == pytest.approx(0.1, rel=1e-6)  # 11 vs the mean 10


def test_the_clients_own_send_lag_never_decides_unless_asked():
    """Its send lag measures the load generator, not the deployment: shown, never a reason to REJECT, unless
    `--judge-client` asks (a compare on 2026-12-05 gave 12 of its 55 reasons from microsecond send lags)."""
    lag = "load.send_lag_s.p99"
    base = claim_side("base", [number(lag, 0.0001, "s", "f", 6, direction="lower"), tps(100.0)], "throughput")
    cand = claim_side("cand", [number(lag, 0.0009, "s", "f", 6, direction="lower"), tps(100.0)], "throughput")
    assert compare(cand, [base], max_slowdown=0.05).verdict == "ACCEPT"
    judged = compare(cand, [base], max_slowdown=0.05, judge_client=True)
    assert judged.verdict == "REJECT" and judged.reasons[0].startswith(f"{lag}: +800.0% vs base")
    assert "shown, not judged" in render_markdown(compare(cand, [base], max_slowdown=0.05))


def test_compare_on_the_console_leads_with_its_decision_in_at_most_40_lines(tmp_path):
    """Two trials of a published rate search (tests/bundles.py's sample), compared as a user would: the
    decision first, the changes that decide it, the headline's figures; every claim with -v."""
    from tests import bundles

    trials = sorted((bundles.DOCS_RUNS / "h200-2026-12-01/mla-2l-load-search/runs").glob("load-*"))
    base, cand = (bundles.plain_copy(run, tmp_path / run.name) for run in trials[:2])

    def run(*args):
        argv = [sys.executable, "-m", "loadproof", *args, "compare", str(base), str(cand), "--anyway"]
        done = subprocess.run(argv + ["--max-slowdown", "5%"], capture_output=True, text=True, timeout=120)
        return done, (done.stdout + done.stderr).splitlines()

    done, lines = run()
    assert done.returncode in (0, 1), done.stderr
    assert lines[0].startswith(("ACCEPT: ", "REJECT: ")) and len(lines) <= 40, "\n".join(lines)
    assert "Key figures" in done.stdout and "load.ttft_s.p99" in done.stdout
    # one run a side: each figure's own interval, how many differ and how many do not, after the decision
    assert "95% CI within runs" in done.stdout and "vs B1, 95% intervals within runs: " in done.stdout
    assert "not distinguishable" in done.stdout.split("Key figures")[0]
    assert not any("send_lag" in line for line in lines if line.startswith("  load."))  # never a reason
    verbose, every = run("-v")
    assert verbose.returncode == done.returncode and len(every) > len(lines)
    assert "load.send_lag_s.p99" in verbose.stdout  # every claim with -v, the client's own too
