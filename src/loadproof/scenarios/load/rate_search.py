"""The search of `loadproof run load --search rate`: the highest request rate that passes, found with real
trials (`series.rate_search_command` runs them).

Bracketing first (from the start, double while trials pass, up to the maximum, or halve while they fail,
down to the minimum), then bisection between the largest passing and the smallest failing rate until
they are within the `Resolution`. Rates are rounded to 4 significant digits so they read as typed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Resolution:
    """How close the largest passing and the smallest failing rate must come before a rate search stops:
    `value` requests/s, or, `relative`, that fraction of the largest passing rate."""

    value: float
    relative: bool

    def met(self, low: float, high: float) -> bool:
        return high - low <= (self.value * low if self.relative else self.value) + 1e-12

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"

    def describe(self) -> str:
        if self.relative:
            return (
                f"resolution {self.value * 100:g}%: bisection stops once the smallest failing rate is within "
                f"{self.value * 100:g}% of the largest passing one"
            )
        return (
            f"resolution {self.value:g} requests/s: bisection stops once the smallest failing rate is within "
            f"{self.value:g} requests/s of the largest passing one"
        )


RESOLUTION_SYNTAX = "requests/s (e.g. 0.5) or a share of the rate (e.g. 10%)"


def parse_resolution(value: object) -> Resolution:
    """`0.5` (requests/s) or `10%` (of the largest passing rate)."""
    if isinstance(value, Resolution):
        return value
    text = str(value).strip()
    relative = text.endswith("%")
    try:
        number = float(text[:-1] if relative else text)
    except ValueError:
        raise ValueError(f"takes {RESOLUTION_SYNTAX} (got {text!r})") from None
    if not (number > 0 and math.isfinite(number)) or (relative and number >= 100):
        raise ValueError(f"must be > 0{' and < 100%' if relative else ''}: {RESOLUTION_SYNTAX} (got {text!r})")
    return Resolution(number / 100 if relative else number, relative)


def round_rate(rate: float, digits: int = 4) -> float:
    """A rate to `digits` significant digits, so the rates tried read as typed (12.5, not 12.500000001)."""
    if rate <= 0:
        return rate
    return round(rate, max(0, digits - 1 - math.floor(math.log10(rate))))


@dataclass
class RateSearchResult:
    tried: list[tuple[float, bool]] = field(default_factory=list)  # (rate, passed) in the order tried
    largest_pass: float | None = None
    smallest_fail: float | None = None
    stopped: str = ""  # why it stopped: resolution, maximum (largest_pass then only a lower bound), minimum


def rate_search(
    start: float,
    passes: Callable[[float], bool],
    resolution: Resolution,
    *,
    maximum: float,
    minimum: float,
    on_trial: Callable[[float, bool], None] | None = None,
) -> RateSearchResult:
    """The highest rate for which `passes(rate)` holds, with real trials:

    bracketing: from `start`, double while trials pass (up to `maximum`), or halve while they fail (down
    to `minimum`); then bisection between the largest pass and the smallest failure until `resolution`
    says they are close enough. Midpoints are rounded to 4 significant digits; no rate is tried twice.
    Assumes attainment falls as the rate rises (one threshold): a pass above a failure is kept as the
    largest pass only if it is below the smallest failure."""
    if not 0 < minimum <= start <= maximum:
        raise ValueError(f"start {start:g} must lie in [{minimum:g}, {maximum:g}]")
    result = RateSearchResult()

    def attempt(rate: float) -> bool:
        ok = passes(rate)
        result.tried.append((rate, ok))
        if on_trial is not None:
            on_trial(rate, ok)
        if ok:
            result.largest_pass = rate if result.largest_pass is None else max(result.largest_pass, rate)
        else:
            result.smallest_fail = rate if result.smallest_fail is None else min(result.smallest_fail, rate)
        return ok

    rate = round_rate(start)
    if attempt(rate):
        while True:
            if rate >= maximum:
                result.stopped = "maximum"
                return result
            rate = min(round_rate(rate * 2), maximum)
            if not attempt(rate):
                break
    else:
        while True:
            rate = round_rate(rate / 2)
            if rate < minimum:
                result.stopped = "minimum"
                return result
            if attempt(rate):
                break
    low, high = result.largest_pass, result.smallest_fail
    assert low is not None and high is not None
    while not resolution.met(low, high):
        mid = round_rate((low + high) / 2)
        if not low < mid < high:
            break
        if attempt(mid):
            low = mid
        else:
            high = mid
    result.stopped = "resolution"
    return result
