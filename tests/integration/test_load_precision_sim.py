"""`loadproof run load --until-precision` against the simulator (a real process): a run that stops once its
figures are precise enough, sends no more, keeps the requests in flight, and publishes a bundle whose stop
`verify` recomputes (a tampered stop is caught); and a run whose precision is out of reach ends at its ceiling
with a FAIL that names the figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadproof.metrics.precision import MIN_REQUESTS
from tests.integration.bundles import publish_and_verify, verify_bundle
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario
from tests.unit.publish.synthetic import reseal

pytestmark = pytest.mark.timeout(180)

# prompts of many lengths: a TTFT of many values (one length clusters on the simulator's step times)
WORKLOAD = ("--input-tokens", "uniform:128:384", "--output-tokens", "16", "--seed", "3")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_stops_at_its_precision_and_a_run_out_of_reach_fails_at_its_ceiling(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path / "precise",
            "load",
            "--rate",
            "20",
            "--duration-s",
            "75",  # a ceiling of 1,500 requests; a few hundred reach the precision asked here
            "--until-precision",
            "ttft_p50=30%,itl_p50=30%",
            *WORKLOAD,
        )
        out_of_reach, missed, _ = run_scenario(
            sim, tmp_path / "ceiling", "load", "--rate", "20", "-n", "40", "--until-precision", "ttft_p99=1%", *WORKLOAD
        )
    value = {name: c["value"] for name, c in claims.items()}
    assert code == 0, claims.get("load.precision.verdict")
    assert value["load.precision.verdict"] == "PASS" and value["load.precision.stopped_by"] == "precision"
    records = rows(run / "requests.jsonl")
    planned = value["load.planned_requests"]
    assert MIN_REQUESTS <= value["load.precision.requests_at_stop"] <= len(records) == value["load.requests"] < planned
    assert all(r["ok"] for r in records)  # those in flight at the stop finished, none was cancelled
    (stop,) = [e for e in rows(run / "events.jsonl") if e["kind"] == "precision_stop"]
    assert stop["records"] == value["load.precision.requests_at_stop"]
    end = next(e for e in rows(run / "events.jsonl") if e["kind"] == "schedule_end")
    assert end["dispatched"] == len(records) and not end["interrupted"]
    assert max(r["dispatch_ns"] for r in records) <= stop["t_ns"] + 1_000_000_000  # nothing sent after the stop
    # but the one it was waiting for (a gap of the schedule)
    for figure, asked in (("ttft_p50", 30.0), ("itl_p50", 30.0)):
        assert value[f"load.precision.{figure}.asked_pct"] == asked
        assert value[f"load.precision.{figure}.at_stop_pct"] <= asked
        assert value[f"load.precision.{figure}.reached_pct"] > 0
    publish_and_verify(run, tmp_path / "bundle")
    tampered = tmp_path / "bundle" / "runs" / run.name / "claims.json"
    payload = json.loads(tampered.read_text())
    (claim,) = [c for c in payload["claims"] if c["name"] == "load.precision.requests_at_stop"]
    claim["value"] -= 1
    claim["printed"] = str(claim["value"])
    tampered.write_text(json.dumps(payload))
    reseal(tmp_path / "bundle")
    verified = verify_bundle(tmp_path / "bundle")
    assert verified.returncode != 0 and "load.precision.requests_at_stop" in verified.stdout, verified.stdout[-2000:]

    missed_value = {name: c["value"] for name, c in missed.items()}
    assert out_of_reach == 1
    assert missed_value["load.precision.stopped_by"] == "ceiling" and missed_value["load.requests"] == 40
    assert missed_value["load.precision.verdict"] == "FAIL"
    assert "368" in missed["load.precision.criteria.ttft_p99"]["formula"]  # a p99 of 40 values has no interval
