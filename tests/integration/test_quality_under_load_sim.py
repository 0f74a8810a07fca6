"""`loadproof run quality --under-load-rate` against the simulator (a real process): the whole path without
the engine, quickly. Both scorings stored, the load beside the items at its rate and cut where they end, the
claims consistent with the stored answers, and a bundle that verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess
from tests.integration.test_quality_under_load import check_under_load_run
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(180)


def under_load(sim: SimProcess, out: Path, items: int, input_tokens: int, output_tokens: int) -> tuple:
    """`run quality` of the first `items` authored tasks beside a constant load of 4 requests/s."""
    return run_scenario(
        sim,
        out,
        "quality",
        *("--endpoint", "completions", "--suites", "authored", "--modes", "plain", "--authored-items", str(items)),
        *("--under-load-rate", "4", "--under-load-arrival", "constant"),
        *("--under-load-input-tokens", str(input_tokens), "--under-load-output-tokens", str(output_tokens)),
    )


def test_quality_under_load_on_the_simulator(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = under_load(sim, tmp_path, items=6, input_tokens=128, output_tokens=8)
    assert code == 0, claims
    check_under_load_run(run, rate=4.0, items=6, rate_tolerance=0.2)
    plan = json.loads((run / "manifest.json").read_text())["plan"]["under_load"]
    assert plan["load"]["planned_requests"] == claims["load.requests"]["value"] < plan["drawn_requests"]
    assert claims["load.schedule_completed"]["value"] is True
    # the only failures: requests in flight at the cut, cancelled there
    load = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    failed = [r for r in load if r["family"] == "load" and not r["ok"]]
    assert claims["load.failed_requests"]["value"] == len(failed) and all(
        r["error_kind"] == "cancelled" for r in failed
    )
    publish_and_verify(run, tmp_path / "bundle")


def test_the_load_stops_at_the_cut(tmp_path: Path):
    """Load requests of 4,000 output tokens take about 8 s each on this simulator, far longer than the items:
    at the cut (the last under-load item ended) nothing more is sent and those still in flight are cancelled
    there, so the load ends with the items, not its requests' deadline later (issue #37)."""
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0, "max_model_len": 8192}) as sim:
        code, claims, run = under_load(sim, tmp_path, items=4, input_tokens=64, output_tokens=4000)
    assert code == 0, claims
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    load = [r for r in records if r["family"] == "load"]
    cut_ns = max(r["end_ns"] for r in records if r["request_id"].endswith(".under-load"))
    assert load and all(r["send_ns"] <= cut_ns for r in load)  # nothing sent after the cut
    cancelled = [r for r in load if not r["ok"]]
    assert cancelled and all(r["error_kind"] == "cancelled" for r in cancelled)  # in flight at the cut
    assert max(r["end_ns"] for r in load) - cut_ns < 2e9  # ended there, not about 8 s later
    plan = json.loads((run / "manifest.json").read_text())["plan"]["under_load"]
    assert plan["load"]["planned_requests"] == len(load) == claims["load.requests"]["value"]
    assert claims["load.schedule_completed"]["value"] is True
    assert claims["load.failed_requests"]["value"] == len(cancelled)
