"""`run load --sample-interval-s 0` against the simulator (a real process): no periodic /metrics samples and no
telemetry sampler at all (no GPU or host rows, NVML never opened), the manifest saying so, the report saying
the samples are absent, and the claims that need them absent rather than zero; the same run sampled has them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(240)

LOAD = ("--rate", "8", "--num-requests", "16", "--input-tokens", "256", "--output-tokens", "64")


@pytest.mark.parametrize("interval", ["0", "0.1"])
def test_sampling_off_leaves_the_samples_and_their_claims_absent(tmp_path: Path, interval: str):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 5.0}) as sim:
        code, claims, run = run_scenario(sim, tmp_path, "load", *LOAD, "--sample-interval-s", interval)
    assert code == 0, claims
    manifest = json.loads((run / "manifest.json").read_text())
    engine_samples = (run / "metrics.jsonl").read_text().splitlines()
    telemetry = run / "telemetry.jsonl"
    report = (run / "report.md").read_text()
    assert "crosscheck.generation_tokens.diff_pct" in claims  # before and after: the engine's totals still agree
    if interval == "0":
        assert manifest["options"]["sample_interval_s"] == 0 and manifest["telemetry"]["sampled"] is False
        assert len(engine_samples) == 2  # before the first request and after the last
        assert not telemetry.exists() or telemetry.read_text() == ""
        assert not [
            name
            for name in claims
            if name.startswith(("telemetry.", "load.engine_running", "load.engine_waiting", "load.engine_kv"))
        ]
        assert "- samples absent: sampling off (--sample-interval-s 0)" in report
    else:
        assert manifest["telemetry"].get("sampled", True) is True
        assert len(engine_samples) > 2 and telemetry.read_text().strip()
        assert "telemetry.samples" in claims and "load.engine_running_max" in claims
        assert "samples absent" not in report
