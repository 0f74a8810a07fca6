"""`sim calibrate` from imported runs (docs/import.md, "Calibrating from imported runs"): three inference-perf runs
at 5, 10 and 15 requests/s against `loadproof sim --config sim-small` (tests/fixtures/ingest/inference-perf/,
written by inference-perf itself); the simulator calibrated from the first two predicts the third, with the range its
open assumptions leave, and the third's measured figures lie within reach: each one's 95% interval meets the
predicted range. From stated figures alone (the same stage files without the per-request one) it calibrates too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from loadproof.ingest.importing import import_results
from loadproof.metrics.load import CONTRACT
from loadproof.predict.base import predictors
from loadproof.predict.calibration import CalibrationLimits, FitShares, calibrate_from_runs
from loadproof.predict.contract import ranged_prediction
from loadproof.predict.load_points import calibration_points
from loadproof.store.run_dir import load_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest" / "inference-perf"
# the simulator's engine as `sim-small` configures it (src/loadproof/data/sim/small.toml): the deployment
SIM_SMALL = CalibrationLimits(kv_tokens=65_536, block_size=16, max_num_seqs=8, max_num_batched_tokens=2048)
FIGURES = (*CONTRACT, "load.itl_s.p50")


def imported(tmp_path: Path, rate: int, per_request: bool = True) -> Path:
    folder = FIXTURES / f"sim-rate-{rate}"
    if not per_request:
        folder = shutil.copytree(folder, tmp_path / f"stated-{rate}")
        (folder / "per_request_lifecycle_metrics.json").unlink()
    (done,) = import_results(folder, tmp_path / f"runs-{rate}-{per_request}", profile="sim-small")
    return done.path


def test_two_runs_calibrate_the_simulator_and_predict_the_third_within_its_measured_intervals(tmp_path):
    runs = [imported(tmp_path, rate) for rate in (5, 10)]
    third = load_run(imported(tmp_path, 15))
    cal = calibrate_from_runs(runs, [], [], tmp_path / "sim.toml", SIM_SMALL, FitShares())
    assert {i.name for i in cal.calibration.config.inputs} == {r.name for r in runs}
    plan = third.manifest.plan
    predictor = predictors.get("load")
    question = predictor.question(
        {
            "rate": str(plan["rate_rps"]),
            "num_requests": len(third.records),
            "input_tokens": plan["input_tokens"]["text"],  # inference-perf's normal:256:32, as run load writes it
            "output_tokens": plan["output_tokens"]["text"],
        },
        "test",
    )
    ranged = ranged_prediction(predictor, question, FIGURES, cal.calibration.config, lambda _: None)
    measured = {c["name"]: c for c in json.loads((third.path / "claims.json").read_text())["claims"]}
    judged = 0
    for figure in ranged.figures:
        assert figure.low <= figure.point <= figure.high
        interval = measured[figure.claim].get("interval")
        if interval is None:  # a tail percentile of 150 requests: no interval to judge by
            continue
        judged += 1
        assert interval["low"] <= figure.high and figure.low <= interval["high"], (figure, interval)
    assert judged >= 4


def test_runs_without_per_request_data_calibrate_from_the_figures_they_state(tmp_path):
    runs = [imported(tmp_path, rate, per_request=False) for rate in (5, 10)]
    points = [calibration_points(load_run(r)) for r in runs]
    assert all(len(p.ttft) == 1 and len(p.windows) == 1 for p in points)
    assert [p.windows[0].batch for p in points] == sorted(p.windows[0].batch for p in points)  # more in flight at 10
    cal = calibrate_from_runs(runs, [], [], tmp_path / "sim.toml", SIM_SMALL, FitShares())
    assert cal.calibration.config.cost.step_overhead_s > 0
    assert any("one prompt length" in a for a in cal.calibration.assumptions)
