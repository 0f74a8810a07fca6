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


def test_quality_under_load_on_the_simulator(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "quality",
            "--endpoint",
            "completions",
            "--suites",
            "authored",
            "--modes",
            "plain",
            "--authored-items",
            "6",
            "--under-load-rate",
            "4",
            "--under-load-arrival",
            "constant",
            "--under-load-input-tokens",
            "128",
            "--under-load-output-tokens",
            "8",
        )
    assert code == 0, claims
    check_under_load_run(run, rate=4.0, items=6, rate_tolerance=0.2)
    plan = json.loads((run / "manifest.json").read_text())["plan"]["under_load"]
    assert plan["load"]["planned_requests"] == claims["load.requests"]["value"] < plan["drawn_requests"]
    assert claims["load.schedule_completed"]["value"] is True and claims["load.failed_requests"]["value"] == 0
    publish_and_verify(run, tmp_path / "bundle")
