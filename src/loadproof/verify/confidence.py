"""A published claim's confidence interval against the one recomputed from the records (docs/verify.md).

claims.json keeps a measured figure's interval beside its value: `{"low", "high", "confidence", "method"}`
(metrics/claims.py). `verify` recomputes it with the figure, so a tampered bound, level or method is a
mismatch. The bounds are compared at the figure's printed precision (both written with as many decimals as
its printed value): the recomputation is deterministic (order statistics, batch means, the score interval),
so only the last printed place could ever differ. A bundle made before claims carried intervals has none, and
a claim published without one is not a mismatch (it claims less); one published with an interval the
records do not give is.
"""

from __future__ import annotations

import math
from typing import Any

from loadproof.metrics.claims import Claim

_KEYS = ("low", "high", "confidence", "method")


def compare_interval(pub: dict[str, Any], claim: Claim) -> str | None:
    """Why the published claim's interval does not match the recomputed one; None when it does."""
    stated = pub.get("interval")
    if stated is None:
        return None
    if claim.interval is None:
        return "an interval is published, the records give none"
    if not isinstance(stated, dict) or set(stated) != set(_KEYS):
        return f"the interval is not an object of {', '.join(_KEYS)}"
    low, high, level, method = (stated[k] for k in _KEYS)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (low, high)):
        return "the interval's bounds are not finite numbers"
    if level != claim.interval.confidence:
        return f"interval confidence {level!r}, recomputed {claim.interval.confidence!r}"
    if method != claim.interval.method:
        return f"interval method {str(method)[:80]!r}, recomputed {claim.interval.method!r}"
    decimals = _decimals(claim.printed)
    shown = f"[{low:.{decimals}f}, {high:.{decimals}f}]"
    recomputed = f"[{claim.interval.low:.{decimals}f}, {claim.interval.high:.{decimals}f}]"
    if shown != recomputed:
        return f"interval {shown}, recomputed {recomputed}"
    return None


def _decimals(printed: str) -> int:
    """The decimals of a printed figure ("0.1234": 4; "12": 0), at most 12."""
    return min(12, len(printed.split(".", 1)[1])) if "." in printed else 0


__all__ = ["compare_interval"]
