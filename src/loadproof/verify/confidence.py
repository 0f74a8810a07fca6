"""A published claim's confidence interval against the one recomputed from the records
(docs/publish-and-verify.md, "Intervals").

claims.json keeps a measured figure's interval beside its value: `{"low", "high", "confidence", "method"}`
(metrics/claims.py). `verify` recomputes it with the figure, so a tampered bound, level or method is a
mismatch. The bounds are compared at the figure's printed precision (both written with as many decimals as
its printed value, metrics/interval_text.py): the recomputation is deterministic (order statistics, batch
means, the score interval), so only the last printed place could ever differ. A bundle made before claims
carried intervals has none, and a claim published without one is not a mismatch (it claims less); one
published with an interval the records do not give is.

The interval is a stranger's value like any other in a bundle: a string, a list, a NaN, a bound past a
double's range or a method of a million characters is a mismatch that says what it is, never an exception.
"""

from __future__ import annotations

import math
from typing import Any

from loadproof.metrics.claims import Claim
from loadproof.metrics.interval_text import bounds, bounds_text, decimals
from loadproof.metrics.intervals import Interval

_KEYS = ("low", "high", "confidence", "method")
MAX_METHOD_SHOWN = 80


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
    if not (_finite(low) and _finite(high)):
        return "the interval's bounds are not finite numbers"
    if not _finite(level) or level != claim.interval.confidence:
        shown = f"{level:g}" if _finite(level) else _kind(level)
        return f"interval confidence {shown}, recomputed {claim.interval.confidence:g}"
    if method != claim.interval.method:
        shown = repr(method[:MAX_METHOD_SHOWN]) if isinstance(method, str) else _kind(method)
        return f"interval method {shown}, recomputed {claim.interval.method!r}"
    places = decimals(claim.printed)
    published = bounds_text(Interval(float(low), float(high), level, method), places)
    recomputed = bounds(claim)
    if published != recomputed:
        return f"interval {published}, recomputed {recomputed}"
    return None


def checked_interval(pub: dict[str, Any], claim: Claim) -> str | None:
    """What `verify` shows of a published claim's interval: None when it states none, else the recomputed
    bounds at the printed precision ("" when the records give none)."""
    if pub.get("interval") is None:
        return None
    return bounds(claim)


def _finite(value: Any) -> bool:
    """A finite number a double holds (an integer of 400 digits is not: float() of it overflows)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _kind(value: Any) -> str:
    """A published value by its type, never its repr (which a crafted value could make huge)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return "a number past a double's range"
    return f"a {type(value).__name__}"


__all__ = ["checked_interval", "compare_interval"]
