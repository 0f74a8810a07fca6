"""A claim's interval in words: the one form report.md, report.html and `verify`'s lines show it in.

A figure with an interval is written `0.1780 [0.1520, 0.2120]`: the printed figure, then its 95% interval in
brackets, each bound with as many decimals as the printed figure (the precision `verify` compares the bounds
at, verify/confidence.py), the level added only where it is not 95% (`[0.1520, 0.2120] at 90%`).

A percentile or a mean (`<...>.<stat>`) without an interval where another statistic of the same values has one
(`load.ttft_s.p99` beside `load.ttft_s.p50`) had too few values for it, and says so where the interval would
be: `0.2736 (n too small for a 95% interval)`; a p99 needs 368 values at 95% (metrics/intervals.py,
`min_count`). A statistic of a figure that carries no interval at all, and every other figure, is written as
printed. Pure: text from claims.
"""

from __future__ import annotations

from collections.abc import Iterable

from loadproof.metrics.claims import Claim
from loadproof.metrics.distribution import PERCENTILES
from loadproof.metrics.intervals import Interval
from loadproof.metrics.uncertainty import CONFIDENCE

TOO_FEW = f"n too small for a {CONFIDENCE:.0%} interval"
MAX_DECIMALS = 12
STAT = ".<stat>"


def decimals(printed: str) -> int:
    """The decimals of a printed figure ("0.1234": 4; "12": 0), at most `MAX_DECIMALS`."""
    return min(MAX_DECIMALS, len(printed.split(".", 1)[1])) if "." in printed else 0


def bounds_text(interval: Interval, places: int) -> str:
    """`[low, high]` with `places` decimals, and the level where it is not 95%."""
    level = "" if interval.confidence == CONFIDENCE else f" at {interval.confidence:.0%}"
    return f"[{interval.low:.{places}f}, {interval.high:.{places}f}]{level}"


def bounds(claim: Claim) -> str:
    """The claim's interval as `[low, high]` at its printed precision; "" without one."""
    return "" if claim.interval is None else bounds_text(claim.interval, decimals(claim.printed))


def _statistic(claim: Claim) -> str | None:
    """The values a percentile or mean claim summarizes (its name without the statistic); None for others."""
    values, _, stat = claim.name.rpartition(".")
    if claim.kind != "figure" or not claim.pattern.endswith(STAT) or not (stat in PERCENTILES or stat == "mean"):
        return None
    return values


def interval_notes(claims: Iterable[Claim]) -> dict[str, str]:
    """What stands beside each claim's printed figure, by name: its bounds, or `(n too small for a 95%
    interval)` (module doc); claims with nothing to say are left out."""
    claims = list(claims)
    carried = {_statistic(c) for c in claims if c.interval is not None} - {None}
    notes = {}
    for claim in claims:
        if claim.interval is not None:
            notes[claim.name] = bounds(claim)
        elif _statistic(claim) in carried:
            notes[claim.name] = f"({TOO_FEW})"
    return notes


def with_interval(claim: Claim, notes: dict[str, str]) -> str:
    """The printed figure and its note (`0.1780 [0.1520, 0.2120]`); the printed figure alone without one."""
    note = notes.get(claim.name, "")
    return f"{claim.printed} {note}" if note else claim.printed


__all__ = ["TOO_FEW", "bounds", "bounds_text", "decimals", "interval_notes", "with_interval"]
