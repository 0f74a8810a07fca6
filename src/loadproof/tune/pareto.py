"""The Pareto front of a tune: goodput (the highest request rate meeting the SLO) against TTFT p99 at that
rate and KV memory. A point is dominated when another is at least as good on all three (rate higher or
equal, TTFT p99 and memory lower or equal) and better on one; the front is the points nobody dominates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loadproof.report.plots import scatter_chart


@dataclass(frozen=True)
class Scored:
    name: str
    rate_rps: float  # 0 when no rate met the SLO
    ttft_p99_s: float
    kv_gib: float


def dominates(a: Scored, b: Scored) -> bool:
    no_worse = a.rate_rps >= b.rate_rps and a.ttft_p99_s <= b.ttft_p99_s and a.kv_gib <= b.kv_gib
    better = a.rate_rps > b.rate_rps or a.ttft_p99_s < b.ttft_p99_s or a.kv_gib < b.kv_gib
    return no_worse and better


def dominated_by(point: Scored, others: Sequence[Scored]) -> Scored | None:
    return next((o for o in others if o.name != point.name and dominates(o, point)), None)


def front(points: Sequence[Scored]) -> list[Scored]:
    return [p for p in points if dominated_by(p, points) is None]


def pareto_svg(title: str, predicted: Sequence[Scored], measured: Sequence[Scored]) -> str:
    """Goodput against TTFT p99: every point as predicted, and the measured ones."""

    def pts(scored: Sequence[Scored]) -> list[tuple[float, float, str]]:
        return [(p.ttft_p99_s, p.rate_rps, p.name) for p in scored if p.rate_rps > 0]

    return scatter_chart(
        title,
        [("predicted", pts(predicted)), ("measured", pts(measured))],
        "TTFT p99 at that rate (s)",
        "highest rate meeting the SLO (requests/s)",
    )
