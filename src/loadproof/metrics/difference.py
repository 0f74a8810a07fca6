"""The difference of one figure between two independent runs, and its interval from each run's own interval.

`mover_difference` is the MOVER ("method of variance estimates recovery": Zou and Donner 2008; Newcombe
1998 for two proportions): from each run's estimate and its interval at one confidence, the interval of
d = cand - base is

    L = d - sqrt((cand - cand.low)^2 + (base.high - base)^2)
    U = d + sqrt((cand.high - cand)^2 + (base - base.low)^2)

Each half of each run's interval stands in for its own variance on that side, so a skewed interval (an
order-statistic interval of a tail percentile, a Wilson interval near 100%) keeps its skew in the difference.
It assumes the runs independent, which two runs one after the other are as far as their sampling goes; what
it does not cover is drift of the machine between them (docs/compare-and-report.md). With two intervals that
each hold their confidence, the difference's holds it to the normal approximation the recovery rests on.

Standard library and msgspec only.
"""

from __future__ import annotations

import math

from loadproof.metrics.intervals import Interval

MOVER = "MOVER of the two runs' own intervals"


def mover_difference(base: float, base_interval: Interval, cand: float, cand_interval: Interval) -> Interval | None:
    """The interval of cand - base from the two runs' intervals; None when their confidences differ."""
    if not math.isclose(base_interval.confidence, cand_interval.confidence):
        return None
    d = cand - base
    # an estimate outside its own interval (it is not, for the intervals claims carry) counts as on its edge
    cand_down, cand_up = max(0.0, cand - cand_interval.low), max(0.0, cand_interval.high - cand)
    base_down, base_up = max(0.0, base - base_interval.low), max(0.0, base_interval.high - base)
    return Interval(
        d - math.hypot(cand_down, base_up),
        d + math.hypot(cand_up, base_down),
        cand_interval.confidence,
        MOVER,
    )


__all__ = ["MOVER", "mover_difference"]
