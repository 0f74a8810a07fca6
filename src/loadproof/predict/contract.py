"""A prediction made into a contract: the figures a scenario's run will be judged on, each with its range
(`sim.ranges`), written by `plan ... --simulate ... --prediction-out FILE` (`rundir.prediction`).

Which figures: capacity's cold TTFT median and max and the window's aggregate rate; load's (one rate)
TTFT p50 and p99, TPOT p50, E2EL p50 and output tokens/s. The options a run must repeat are the ones the
prediction honoured (capacity: N, L, W and the timing bounds; load: every option of `run load` a
prediction takes but the SLO and attainment, which judge and do not shape the traffic).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError
from loadproof.rundir.prediction import AssumptionRange, InputDigest, PredictedFigure, Prediction, checked, encode
from loadproof.scenarios.capacity import CapacityOptions
from loadproof.sim.config import SimConfig
from loadproof.sim.predict import LOAD_FIELDS, RateSweep, predict_capacity_run, predict_load_sweep
from loadproof.sim.ranges import RangedPrediction, predict_ranges

CAPACITY_FIGURES = ("capacity.cold_ttft_median_s", "capacity.cold_ttft_max_s", "capacity.window_aggregate_tokens_per_s")
CAPACITY_OPTIONS = ("sessions", "input_tokens", "window_s", "max_tokens", "max_gap_s", "admission_stall_s")
LOAD_FIGURES = ("load.ttft_s.p50", "load.ttft_s.p99", "load.tpot_s.p50", "load.e2el_s.p50", "load.output_tokens_per_s")
LOAD_OPTIONS = tuple(f for f in LOAD_FIELDS if f not in ("slo", "attainment"))
DEFAULT_TOLERANCE_PCT = 10.0


def capacity_ranges(config: SimConfig, options: CapacityOptions, say: Callable[[str], None]) -> RangedPrediction:
    def figures(cfg: SimConfig) -> dict[str, float | None]:
        claims = {c.name: c.value for c in predict_capacity_run(cfg, "capacity", options).claims}
        return {name: _number(claims.get(name)) for name in CAPACITY_FIGURES}

    return predict_ranges(config, figures, say)


def load_ranges(config: SimConfig, sweep: RateSweep, say: Callable[[str], None]) -> RangedPrediction:
    if len(sweep.rates_rps) != 1:
        raise UsageError("a load prediction with ranges takes one --rate (the run it promises)")

    def figures(cfg: SimConfig) -> dict[str, float | None]:
        run = predict_load_sweep(cfg, sweep).rates[0].run
        return {name: _number(run.value(name)) for name in LOAD_FIGURES}

    return predict_ranges(config, figures, say)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def contract(
    scenario: str,
    options: dict[str, Any],
    ranged: RangedPrediction,
    config: SimConfig,
    profile: Path,
    tolerance_pct: float,
) -> Prediction:
    """The prediction file's contents: `options` is the scenario's options model dumped as JSON."""
    keep = CAPACITY_OPTIONS if scenario == "capacity" else LOAD_OPTIONS
    prediction = Prediction(
        scenario=scenario,
        options={k: options[k] for k in keep if k in options},
        tolerance_pct=tolerance_pct,
        made_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        sim_profile=InputDigest(name=profile.name, sha256=hashlib.sha256(profile.read_bytes()).hexdigest()),
        calibration_inputs=[InputDigest(name=i.name, sha256=i.sha256) for i in config.inputs],
        figures=[
            PredictedFigure(claim=f.claim, point=f.point, low=f.low, high=f.high, driver=f.driver)
            for f in ranged.figures
        ],
        assumptions=[
            AssumptionRange(name=a.name, point=a.point, values=a.values, pinned_by=a.pinned_by)
            for a in ranged.assumptions
        ],
        source=config.source,
    )
    return checked(prediction, "the prediction")


def write_contract(path: Path, prediction: Prediction) -> None:
    try:
        path.write_bytes(encode(prediction))
    except OSError as exc:
        raise UsageError(f"--prediction-out {path}: cannot write it ({exc.strerror or exc})") from None
