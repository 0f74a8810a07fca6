"""The prefill scenario on the simulator, its catalog entry's `predict` and `calibrate`.

`plan --simulate prefill` is the capacity scenario's prediction with one session, not judged
(`predict.capacity`); a prefill run gives `sim calibrate` each repeat's cold TTFT at its length and the decode
rate after it, a point at that context (`predict.points.request_points`).
"""

from __future__ import annotations

from loadproof.predict.capacity import CapacityPredictor
from loadproof.predict.points import RunPoints, request_points
from loadproof.store.run_dir import Run

PREDICTOR = CapacityPredictor(one_session=True)


def calibration_points(run: Run) -> RunPoints:
    return request_points(run, each_ttft=True, by_length=True)
