"""Distributions of latencies: mean, standard deviation, percentiles and max, as vLLM's `bench serve`
computes them, so the two agree on the same data.

- percentile p of n values: numpy.percentile's default ("linear", Hyndman and Fan's type 7): sort the
  values x[0..n-1], h = (n - 1) * p / 100, and interpolate x[floor(h)] + (h - floor(h)) * (x[floor(h)+1]
  - x[floor(h)]). p50 is the median; p100 the max. `statistics.quantiles(method="inclusive")` is the
  same method. `quantile(ordered, q)` is the same for q = p / 100, its rank h = (n - 1) * q taken as
  written (the A/B bootstrap's interval, metrics/ab.py): each keeps the figures it has always published,
  which a rank computed the other way could move by a rounding step.
- std: the population standard deviation (numpy.std's default, ddof 0).
- Up to `EXACT_LIMIT` values (1,000,000) every figure is exact, from the sorted values. Above it the
  percentiles come from a log-linear (HDR-style) histogram: 1,024 equal buckets per power of two, so a
  bucket is at most 2**-10 of its values wide, and each value stands at its bucket's middle, at most
  2**-11 (0.05%, `HISTOGRAM_RELATIVE_ERROR`) of itself away; every percentile (interpolated between two
  such values) is then within 0.05% of the exact one. Mean, std and max stay exact.

Standard library only: `verify` reaches this module.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

EXACT_LIMIT = 1_000_000
HISTOGRAM_BITS = 10  # 2**10 buckets per power of two
HISTOGRAM_RELATIVE_ERROR = 2.0 ** -(HISTOGRAM_BITS + 1)
STATS = ("mean", "std", "p50", "p90", "p95", "p99", "p99_9", "max")
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}


class Ranked(Protocol):
    """Values in ascending order, read by rank: a sorted list, or a `Histogram`."""

    def __len__(self) -> int: ...

    def __getitem__(self, rank: int, /) -> float: ...


def percentile(ordered: Ranked, p: float) -> float:
    """The p-th percentile (0 <= p <= 100) of values sorted ascending, by linear interpolation."""
    return _at_rank(ordered, (len(ordered) - 1) * p / 100.0)


def quantile(ordered: Ranked, q: float) -> float:
    """The q-quantile (0 <= q <= 1) of values sorted ascending: `percentile` at 100 q, by the same method."""
    return _at_rank(ordered, (len(ordered) - 1) * q)


def _at_rank(ordered: Ranked, h: float) -> float:
    """The value at fractional rank h (0 <= h <= n - 1), interpolated linearly between its neighbours."""
    n = len(ordered)
    if n == 0:
        raise ValueError("the percentile of no values")
    lo = math.floor(h)
    if lo >= n - 1:
        return float(ordered[-1])
    frac = h - lo
    a, b = ordered[lo], ordered[lo + 1]
    return float(a + (b - a) * frac)


@dataclass(frozen=True)
class Summary:
    count: int
    mean: float
    std: float
    max: float
    percentiles: dict[str, float]
    exact: bool  # False: the percentiles come from the histogram (within HISTOGRAM_RELATIVE_ERROR)

    def stat(self, name: str) -> float:
        if name in PERCENTILES:
            return self.percentiles[name]
        return float(getattr(self, name))

    @property
    def method(self) -> str:
        if self.exact:
            return f"exact over {self.count} values, percentiles interpolated linearly (numpy's default)"
        return (
            f"{self.count} values: mean, std and max exact; percentiles from a log-linear histogram, "
            f"within {HISTOGRAM_RELATIVE_ERROR * 100:.2f}% of exact"
        )


def summarize(values: Sequence[float]) -> Summary | None:
    """Mean, population std, max and the `PERCENTILES` of `values` (None when there are none)."""
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
    if n <= EXACT_LIMIT:
        ordered = sorted(values)
        return Summary(
            n, mean, std, float(ordered[-1]), {k: percentile(ordered, p) for k, p in PERCENTILES.items()}, True
        )
    histogram = Histogram(values)
    return Summary(
        n, mean, std, float(max(values)), {k: histogram.percentile(p) for k, p in PERCENTILES.items()}, False
    )


class Histogram:
    """Counts of values in log-linear buckets: within each power of two, 2**HISTOGRAM_BITS equal buckets.
    A bucket stands for its middle, at most HISTOGRAM_RELATIVE_ERROR of a value away from it."""

    def __init__(self, values: Sequence[float]) -> None:
        counts: Counter[tuple[int, int, int]] = Counter()  # (sign, exponent, index within the power of two)
        scale = 2 ** (HISTOGRAM_BITS + 1)
        frexp = math.frexp
        for v in values:
            if v == 0:
                counts[(0, 0, 0)] += 1
                continue
            mantissa, exponent = frexp(abs(v))  # 0.5 <= mantissa < 1
            counts[(1 if v > 0 else -1, exponent, int((mantissa - 0.5) * scale))] += 1
        # ascending by value: negatives by falling magnitude, then zero, then positives by rising magnitude
        self._buckets = sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][0] * kv[0][1], kv[0][0] * kv[0][2]))
        self.count = len(values)

    @staticmethod
    def middle(key: tuple[int, int, int]) -> float:
        sign, exponent, index = key
        scale = 2 ** (HISTOGRAM_BITS + 1)
        return sign * math.ldexp(0.5 + (index + 0.5) / scale, exponent)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, rank: int) -> float:
        """The value of the given rank (ascending; -1 the last), as its bucket's middle stands for it."""
        rank = rank + self.count if rank < 0 else rank
        seen = 0
        for key, n in self._buckets:
            seen += n
            if rank < seen:
                return self.middle(key)
        return self.middle(self._buckets[-1][0])

    def percentile(self, p: float) -> float:
        """As `percentile` of the sorted values, each value its bucket's middle."""
        return percentile(self, p)
