"""`--slo` on the closed-loop commands (throughput, sessions, ab): the good requests, attainment, goodput over
the span and each SLO's share, by hand, under each scenario's own name; none without an SLO."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.latency import span_s
from loadproof.metrics.slo import slo_claims
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_ab, test_sessions

SLO = {
    "ttft": 0.35
}  # of the sessions records: warm turns of 0.2 and 0.3 s meet it, cold 1.0, 1.2 and the failure do not


def sessions_run(slo: dict[str, float] = SLO) -> Run:
    plan = msgspec.structs.replace(test_sessions.PLAN, slo=slo)
    return rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(plan)}, test_sessions.RECORDS)


def throughput_run() -> Run:
    records = [
        msgspec.structs.replace(r, scenario="throughput", family="english", concurrency=1)
        for r in test_sessions.RECORDS
    ]
    plan = {"families": ["english"], "concurrency": [1], "max_tokens": 4, "slo": SLO}
    return rv.run_of(None, {"scenario": "throughput", "plan": plan}, records)


def ab_run() -> Run:  # ttft 0.1 s in rounds 0 and 1, 0.5 s in round 2 (arm b's rate one higher)
    records = [test_ab.rec(arm, r, 10.0, ttft=0.1 if r < 2 else 0.5) for r in range(3) for arm in "ab"]
    return rv.run_of(None, {"scenario": "ab", "plan": dict(test_ab.plan(3), slo={"ttft": 0.2})}, records)


def values(run: Run) -> dict[str, object]:
    return {c.name: c.value for c in compute_claims(run)}


def test_sessions_and_throughput_count_the_requests_that_met_the_slo():
    for scenario, run in (("sessions", sessions_run()), ("throughput", throughput_run())):
        got = values(run)
        span = (test_sessions.RECORDS[2].end_ns - test_sessions.RECORDS[0].send_ns) / 1e9  # 0.0 to u0's third end
        assert got[f"{scenario}.good_requests"] == 2
        assert got[f"{scenario}.slo_attainment_pct"] == pytest.approx(100 * 2 / 5)
        assert got[f"{scenario}.goodput_rps"] == pytest.approx(2 / span)
        assert got[f"{scenario}.slo.ttft.met_pct"] == pytest.approx(40.0)
        assert got[f"{scenario}.slo"] == "ttft <= 350 ms"


def test_ab_counts_both_arms_together():
    got = values(ab_run())
    assert got["ab.good_requests"] == 4 and got["ab.slo_attainment_pct"] == pytest.approx(100 * 4 / 6)


def test_no_slo_no_claims():
    assert not any(".slo" in name or "good_requests" in name for name in values(sessions_run({})))
    assert slo_claims([], SLO, 1.0) == [] and span_s([]) == 0.0


def docs_runs(tmp_path) -> list[Run]:  # tests/unit/metrics/test_docs_formulas.py: these claims' formulas
    return [sessions_run(), throughput_run(), ab_run()]


def test_the_throughput_table_reads_levels_and_not_the_slo_claims():
    """The report's table is built from the level claims alone (an SLO's `throughput.slo.ttft.met_pct` once broke
    it, on the H200, after the run was recorded)."""
    from loadproof.metrics.throughput import throughput_table

    table = throughput_table(compute_claims(throughput_run()))
    assert table.header[0] == "family" and [row[0] for row in table.rows] == ["english"]
