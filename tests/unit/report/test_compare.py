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
from loadproof.metrics.claims import Claim, number
from loadproof.report.compare import (
    DESCRIPTIVE,
    bootstrap_change_ci,
    build_side,
    claim_direction,
    compare,
    parse_percent,
    quality_answer_changes,
    render_markdown,
    table,
)
from loadproof.store.run_dir import Run, load_run
from tests.unit.report.synthetic import stream, throughput_run, write_run

DECODE = "throughput.english.c1.decode_tokens_per_s"
TTFT = "throughput.english.c1.ttft_median_s"


def side(tmp_path, label, rates):
    return build_side(label, [load_run(throughput_run(tmp_path, label, rates))], compute_claims)


def claim_side(label, claims, scenario="capacity"):
    """A side whose claims are given directly (for verdicts and exact budget figures)."""
    run = Run(path=Path(label), manifest={"run_id": label, "scenario": scenario}, records=[])
    return build_side(label, [run], lambda _run: claims)


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
    assert ch.ci is not None and ch.ci[0] > 0 and ch.significant
    text = render_markdown(result)
    assert DESCRIPTIVE not in text and "95% CI vs B1" in text and "significant" in text


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
    low, high = bootstrap_change_ci([10.0, 10.2, 9.9, 10.1, 10.05], [12.0, 12.1, 11.9, 12.2, 12.05],
                                    random.Random(1), 2000)
    assert 0 < low < 0.2 < high < 0.25  # the true change is +20%


def test_bootstrap_includes_zero_for_identical_distributions():
    values = [10.0, 11.0, 9.0, 10.5, 9.5, 10.2]
    low, high = bootstrap_change_ci(values, list(values), random.Random(1), 2000)
    assert low < 0 < high


def test_bootstrap_needs_two_values_on_each_side():
    assert bootstrap_change_ci([10.0], [11.0, 12.0], random.Random(1)) is None


def budget_sides(cand_tps, cand_ttft):
    base = claim_side("base", [number("throughput.x.c1.decode_tokens_per_s", 100.0, "tokens/s", "f"),
                               number("throughput.x.c1.ttft_median_s", 1.0, "s", "f", 3)], "throughput")
    cand = claim_side("cand", [number("throughput.x.c1.decode_tokens_per_s", cand_tps, "tokens/s", "f"),
                               number("throughput.x.c1.ttft_median_s", cand_ttft, "s", "f", 3)], "throughput")
    return base, cand


@pytest.mark.parametrize(("tps", "ttft", "verdict", "culprit"), [
    (90.0, 1.0, "ACCEPT", None),  # throughput exactly 10% worse: within budget
    (89.5, 1.0, "REJECT", "decode_tokens_per_s: -10.5%"),
    (150.0, 1.0, "ACCEPT", None),  # better is never rejected
    (100.0, 1.10, "ACCEPT", None),  # latency exactly 10% worse
    (100.0, 1.105, "REJECT", "ttft_median_s: +10.5%"),
    (100.0, 0.5, "ACCEPT", None),
])
def test_max_slowdown_on_both_sides_of_the_threshold(tps, ttft, verdict, culprit):
    base, cand = budget_sides(tps, ttft)
    result = compare(cand, [base], max_slowdown=parse_percent("10%"))
    assert result.verdict == verdict
    if culprit:
        assert any(culprit in r and "vs base" in r for r in result.reasons)


def test_max_slowdown_against_any_baseline():
    slow, _ = budget_sides(100.0, 1.0)
    fast = claim_side("fast", [number("throughput.x.c1.decode_tokens_per_s", 130.0, "tokens/s", "f")], "throughput")
    _, cand = budget_sides(105.0, 1.0)
    result = compare(cand, [slow, fast], max_slowdown=0.10)
    assert result.verdict == "REJECT"
    assert len(result.reasons) == 1 and "vs fast" in result.reasons[0] and "-19.2%" in result.reasons[0]


def capacity_claims(verdict, aggregate):
    claims = [number("capacity.window_aggregate_tokens_per_s", aggregate, "tokens/s", "f"),
              Claim("capacity.verdict", verdict, "", verdict, "PASS only if every criterion passed"),
              Claim("capacity.criteria.all_streams_started", "PASS", "", "PASS", "4/4 sessions produced a first token")]
    status = "FAIL" if verdict == "FAIL" else "PASS"
    claims.append(Claim("capacity.criteria.running", status, "", status, "num_requests_running min 3, max 4 (want 4)"))
    return claims


def test_a_failing_candidate_is_rejected_with_its_failure_and_kept_in_the_table():
    base = claim_side("base", capacity_claims("PASS", 100.0))
    cand = claim_side("cand", capacity_claims("FAIL", 120.0))
    result = compare(cand, [base])
    assert result.verdict == "REJECT"
    assert result.reasons == ["capacity.verdict FAIL in candidate run cand: running: num_requests_running min 3, "
                              "max 4 (want 4)"]
    assert result.names == ["capacity.window_aggregate_tokens_per_s"]  # its figures are still compared
    assert "- REJECT: capacity.verdict FAIL" in render_markdown(result)


def test_require_an_acceptance():
    base = claim_side("base", capacity_claims("PASS", 100.0))
    assert compare(claim_side("cand", capacity_claims("PASS", 100.0)), [base], required=["capacity"]).verdict == "ACCEPT"
    no_verdict = claim_side("cand", [number("capacity.window_aggregate_tokens_per_s", 100.0, "tokens/s", "f")])
    result = compare(no_verdict, [base], required=["capacity"])
    assert result.verdict == "REJECT" and "has no capacity.verdict claim" in result.reasons[0]


def test_a_failed_baseline_is_noted_not_rejected():
    result = compare(claim_side("cand", capacity_claims("PASS", 100.0)), [claim_side("base", capacity_claims("FAIL", 90.0))])
    assert result.verdict == "ACCEPT"
    assert any("baseline run base failed its acceptance" in n for n in result.notes)


def test_no_shared_claim_is_an_input_error(tmp_path):
    cand = side(tmp_path, "cand", [10.0])
    other = claim_side("soak", [number("soak.requests", 10, "requests", "f")], "soak")
    with pytest.raises(UsageError, match="no shared claim between soak"):
        compare(cand, [other])


def test_directions():
    assert claim_direction("throughput.code.c8.aggregate_tokens_per_s") == ("higher", "throughput")
    assert claim_direction("capacity.cold_ttft_median_s") == ("lower", "latency")
    assert claim_direction("prefill.r0.ttft_s") == ("lower", "latency")
    assert claim_direction("soak.short.latency_median_first_half_s") == ("lower", "latency")
    assert claim_direction("ab.decode_tokens_per_s.b") == ("higher", "throughput")
    assert claim_direction("ab.decode_tokens_per_s.change")[0] == "neutral"
    assert claim_direction("capacity.sessions")[0] == "neutral"
    assert claim_direction("capacity.input_tokens")[0] == "neutral"
    assert claim_direction("capacity.window_s")[0] == "neutral"  # a setting, not a latency


def test_parse_percent():
    assert parse_percent("10%") == pytest.approx(0.10)
    assert parse_percent("2.5") == pytest.approx(0.025)
    with pytest.raises(UsageError, match="percentage"):
        parse_percent("ten")


def test_quality_answers_listed_per_baseline(monkeypatch):
    seen = []

    def answer_changes(base, cand):
        seen.append((base.run_id, cand.run_id))
        return {"same_answer": ["q1"], "fixed_errors": [],
                "new_errors": [{"suite": "gsm8k", "item_id": "q7", "mode": "", "expected": "3", "base": "3",
                                "candidate": "4"}]}

    monkeypatch.setitem(sys.modules, "loadproof.metrics.quality", types.SimpleNamespace(answer_changes=answer_changes))
    score = [number("quality.gsm8k.correct", 10, "items", "f")]
    result = compare(claim_side("cand", score, "quality"), [claim_side("b1", score, "quality"), claim_side("b2", score, "quality")])
    quality_answer_changes(result)
    assert seen == [("b1", "cand"), ("b2", "cand")]
    text = render_markdown(result)
    assert "Against b1:" in text and "Against b2:" in text and "| new_errors | 1 | gsm8k/q7: 3 -> 4 |" in text
    assert "| same_answer | 1 | q1 |" in text


def test_cli_exit_codes(tmp_path):
    base = throughput_run(tmp_path, "base", [10.0])
    cand = throughput_run(tmp_path, "cand", [8.0])
    soak = write_run(tmp_path, "soak", "soak", [stream("s0", send=0, first=0.1, rate=10, scenario="soak", family="short")],
                     {"plan": {"max_error_rate": 0.0, "max_latency_drift": 0.25, "max_rss_growth_mib": 512}})

    def run(*args):
        return subprocess.run([sys.executable, "-m", "loadproof", "compare", *map(str, args)],
                              capture_output=True, text=True, timeout=60)

    out = tmp_path / "cmp.md"
    rejected = run(base, cand, "--max-slowdown", "10%", "--out", out)
    assert rejected.returncode == 1, rejected.stderr
    assert "REJECT" in rejected.stdout and "-20.0%" in out.read_text()
    accepted = run(base, cand, "--max-slowdown", "25")
    assert accepted.returncode == 0, accepted.stderr
    bad = run(base, soak)
    assert bad.returncode == 2 and "no shared claim" in bad.stderr and "Traceback" not in bad.stderr


def test_repeats_on_one_side_only_stay_descriptive(tmp_path):
    result = compare(side(tmp_path, "cand", [11.0]), [side(tmp_path, "base", [10.0, 10.5, 9.5])])
    text = render_markdown(result)
    assert "descriptive: a single run on one side, no confidence interval" in text and "95% CI" not in text
    assert result.baselines[0].changes[DECODE].change == pytest.approx(0.1, rel=1e-6)  # 11 vs the mean 10
