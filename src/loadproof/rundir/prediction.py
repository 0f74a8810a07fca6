"""A prediction contract: what `plan ... --simulate ... --prediction-out FILE` promised before a run, and
what `run ... --prediction FILE` keeps in the manifest so the run is judged against it
(`metrics.prediction`), by the run and offline by `verify` (docs/simulator.md, "Prediction contracts").

The file holds the scenario and the options the run must have, each predicted figure (a claim name of that
scenario, its point value and its range), the tolerance, the assumptions behind the ranges, and the
calibration's inputs with their sha256, so a reader can tell which evidence the promise rested on (a run's
sha256 is `store.digest.measurement_digest`, the same for its published copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import UsageError
from loadproof.rundir.json_value import JSONObject

FORMAT = "loadproof.prediction/1"
MAX_FILE_BYTES = 1 << 20


class InputDigest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str
    sha256: str


class PredictedFigure(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    claim: str  # the scenario's claim name (`capacity.cold_ttft_median_s`)
    point: float
    low: float
    high: float
    driver: str | None = None  # the assumption that drives the range's width


class AssumptionRange(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: str
    point: float | str
    values: list[float | str]
    pinned_by: str = ""


class Prediction(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    format: str = FORMAT
    scenario: str
    options: JSONObject  # the scenario's options the prediction was made for; the run must have the same
    tolerance_pct: float
    made_at: str  # UTC, when the prediction was written (before the run)
    sim_profile: InputDigest
    calibration_inputs: list[InputDigest] = []
    figures: list[PredictedFigure]
    assumptions: list[AssumptionRange] = []
    source: str = ""  # the sim profile's own account of its inputs and assumptions


def read_prediction(path: Path) -> Prediction:
    """A prediction file, checked; one line naming the problem otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--prediction {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise UsageError(f"--prediction {path}: larger than {MAX_FILE_BYTES:,} bytes, not a prediction file")
    try:
        prediction = msgspec.json.decode(data, type=Prediction)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UsageError(f"--prediction {path}: not a prediction file ({exc})") from None
    return checked(prediction, f"--prediction {path}")


def checked(prediction: Prediction, where: str) -> Prediction:
    if prediction.format != FORMAT:
        raise UsageError(f"{where}: format {prediction.format!r}, this loadproof reads {FORMAT}")
    if not prediction.figures:
        raise UsageError(f"{where}: predicts no figure")
    if not 0 < prediction.tolerance_pct < 1000:
        raise UsageError(f"{where}: tolerance_pct {prediction.tolerance_pct} is not a percentage above 0")
    for f in prediction.figures:
        if not f.low <= f.point <= f.high:
            raise UsageError(f"{where}: {f.claim}'s point {f.point} is outside its range [{f.low}, {f.high}]")
    return prediction


def mismatched_options(prediction: Prediction, options: dict[str, Any]) -> str | None:
    """Why a run with `options` (its options model dumped) is not the run `prediction` was made for."""
    for key, want in prediction.options.items():
        if options.get(key) != want:
            return f"predicted for {key} = {want!r}, this run has {options.get(key)!r}"
    return None


def encode(prediction: Prediction) -> bytes:
    return msgspec.json.format(msgspec.json.encode(prediction), indent=2) + b"\n"
