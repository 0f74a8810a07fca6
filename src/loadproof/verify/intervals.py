"""The printed-precision rule: a figure printed as "7.4" stands for the closed interval [7.35, 7.45].

A recomputed value matches a printed figure iff it lies in that interval. Only float rounding is
allowed at the ends (`REL_EPS` relative), so 7.35, stored as the double 7.34999999999999964..., still
matches "7.4", and 7.3 does not. Integers printed without decimals stand for [n - 0.5, n + 0.5], which
an integer meets only at n. Bundle data is never rounded (times are integer ns), so no interval needs
widening for rounded inputs.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

REL_EPS = Decimal("1e-9")


def printed_interval(printed: str) -> tuple[Decimal, Decimal] | None:
    """[lo, hi] a printed decimal stands for, or None when `printed` is not a finite decimal."""
    try:
        shown = Decimal(printed.strip())
    except (InvalidOperation, AttributeError):
        return None
    if not shown.is_finite():
        return None
    exponent = shown.as_tuple().exponent
    assert isinstance(exponent, int)
    half = Decimal(5).scaleb(exponent - 1)  # half a unit in the last printed place
    return shown - half, shown + half


def matches_printed(value: float | int, printed: str) -> bool:
    """True iff the exact `value` rounds to `printed` under the interval rule."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return printed.strip().lower() == str(value)  # f"{nan:.1f}" prints "nan", inf "inf"
    interval = printed_interval(printed)
    if interval is None:
        return False
    lo, hi = interval
    slack = REL_EPS * max(abs(lo), abs(hi))
    exact = Decimal(value)  # exact binary value of the float, no rounding
    return lo - slack <= exact <= hi + slack
