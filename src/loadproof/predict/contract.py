"""A prediction made into a contract: the figures a scenario's run will be judged on, each with its range
(`predict.ranges`), written by `plan ... --simulate NAME ... --prediction-out FILE` (`rundir.prediction`).

Which figures: the claims the scenario's catalog entry names as its `contract` (metrics/NAME.py's `CONTRACT`:
capacity's cold TTFT median and max and the window's aggregate rate; load's, at one rate, TTFT p50 and p99,
TPOT p50, E2EL p50 and output tokens/s). The options a run must repeat are the ones its predictor honoured
(`Predictor.contract_options`: capacity's N, L, W and the timing bounds; every option of `run load` a
prediction takes but the SLO and attainment, which judge and do not shape the traffic).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError
from loadproof.predict.base import Predictor
from loadproof.predict.ranges import RangedPrediction, predict_ranges
from loadproof.rundir.prediction import AssumptionRange, InputDigest, PredictedFigure, Prediction, checked, encode
from loadproof.sim.config import SimConfig

DEFAULT_TOLERANCE_PCT = 10.0


def ranged_prediction(
    predictor: Predictor[Any], question: Any, names: Sequence[str], config: SimConfig, say: Callable[[str], None]
) -> RangedPrediction:
    """The figures `names` of `question`'s predicted run, each with its range over the profile's open
    assumptions."""

    def figures(cfg: SimConfig) -> dict[str, float | None]:
        claims = {c.name: c.value for c in predictor.claims(cfg, question)}
        return {name: _number(claims.get(name)) for name in names}

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
    """The prediction file's contents: `options` are the ones a run must repeat, as JSON."""
    prediction = Prediction(
        scenario=scenario,
        options=options,
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
