"""`run load --thinking low` against the simulator as a model that does not reason (a real process, no
`--reasoning-share`): the run is measured, and a warning line comes first in its summary and its report
(issue #37: it ran without a word). Whether a model reasons is known only from its answers: nothing up
front says so (a chat template's thinking switch is not served, and a model may reason without one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.sim_process import SimProcess
from tests.integration.test_dataset_check_sim import run_load

pytestmark = pytest.mark.timeout(180)

WARNING = "warning: --thinking low was asked, but none of the 4 successful answers streamed reasoning"


def test_thinking_asked_of_a_model_that_does_not_reason_is_said_first(tmp_path: Path):
    out = tmp_path / "runs"
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        proc = run_load(sim, out, "--output-tokens", "8", "--thinking", "low")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[0].startswith(WARNING)  # the summary's first line
    (run,) = out.iterdir()
    claims = {c["name"]: c for c in json.loads((run / "claims.json").read_text())["claims"]}
    assert claims["load.requests"]["value"] == 4 and "load.reasoning.requests" not in claims  # measured all the same
    report = (run / "report.md").read_text(encoding="utf-8").splitlines()
    assert report[2].startswith("- " + WARNING)  # the report's first line after its title
    assert "does not reason" in report[2]
    assert "--thinking low was asked" in (run / "report.html").read_text(encoding="utf-8")
