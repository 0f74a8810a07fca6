"""The printed-precision rule: a figure printed as "7.4" stands for the closed interval [7.35, 7.45].

A recomputed value matches a printed figure iff it lies in that interval. Only float rounding is
allowed at the ends (`REL_EPS` relative), so 7.35, stored as the double 7.34999999999999964..., still
matches "7.4", and 7.3 does not. Integers printed without decimals stand for [n - 0.5, n + 0.5], which
an integer meets only at n. Bundle data is never rounded (times are integer ns), so no interval needs
widening for rounded inputs.

A printed figure is what `f"{value:.Nf}"` or `str(int)` writes: digits, at most one point, an optional
sign, at most `MAX_PRINTED_CHARS` characters. Anything else (`1e1000000000`, `Infinity`, `7_4`, a
5,000-digit string) is not a figure, so no claim matches it; the arithmetic runs in a private decimal
context wide enough to be exact for every figure that is, and never raises.
"""

from __future__ import annotations

import math
import re
from decimal import Context, Decimal

REL_EPS = Decimal("1e-9")
MAX_PRINTED_CHARS = 100
_FIGURE = re.compile(r"[+-]?\d+(?:\.\d+)?")
# exact for figures of up to MAX_PRINTED_CHARS digits against any double (at most 767 significant digits)
_EXACT = Context(prec=2000, Emax=10_000, Emin=-10_000)


def printed_interval(printed: str) -> tuple[Decimal, Decimal] | None:
    """[lo, hi] a printed decimal stands for, or None when `printed` is not a printed figure."""
    if not isinstance(printed, str):
        return None
    printed = printed.strip()
    if len(printed) > MAX_PRINTED_CHARS or not _FIGURE.fullmatch(printed):
        return None
    shown = Decimal(printed)
    exponent = shown.as_tuple().exponent
    assert isinstance(exponent, int)
    half = Decimal(5).scaleb(exponent - 1, _EXACT)  # half a unit in the last printed place
    return _EXACT.subtract(shown, half), _EXACT.add(shown, half)


def matches_printed(value: float | int, printed: str) -> bool:
    """True iff the exact `value` rounds to `printed` under the interval rule."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not isinstance(printed, str):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return printed.strip().lower() == str(value)  # f"{nan:.1f}" prints "nan", inf "inf"
    interval = printed_interval(printed)
    if interval is None:
        return False
    lo, hi = interval
    slack = _EXACT.multiply(REL_EPS, max(lo.copy_abs(), hi.copy_abs()))
    exact = Decimal(value)  # exact binary value of the float, no rounding
    return _EXACT.subtract(lo, slack) <= exact <= _EXACT.add(hi, slack)
