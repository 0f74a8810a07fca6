"""Between-run variation: a figure measured once per run, over several runs of one scenario, and the difference
between two arms run interleaved (`loadproof run SCENARIO --repeats N`, `loadproof run ab --scenario SCENARIO`).

A run's figure is one value; the runs are the samples. Within a run, a claim's own interval covers the
sampling of its requests; across runs, what moves is the machine (clocks, caches, the engine's own step time),
which no single run can see. These intervals are the runs':

- `spread`: the mean of n runs' values and its Student t interval, mean +/- t(1 - alpha/2, n - 1) s / sqrt(n),
  s the runs' sample standard deviation; no interval for a single run.
- `arm_difference`: mean(b) - mean(a) and Welch's interval, d +/- t(1 - alpha/2, nu) sqrt(s_a^2/n_a +
  s_b^2/n_b), nu the Welch-Satterthwaite degrees of freedom; the arms are *not distinguishable* when the
  interval contains 0. Run in A B B A order (`abba_order`), a drift of the machine that is linear in time falls
  equally on both arms' means (exactly for an even count of pairs, within one run's step for an odd one); it
  still widens each arm's spread, so the interval errs wide, not narrow. When both arms' values are each
  constant the difference is exact (a zero-width interval).

Standard library and msgspec only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from loadproof.metrics.intervals import DEFAULT_CONFIDENCE, Interval, student_t_quantile

T_MEAN = "Student t over runs"
WELCH = "Welch t over runs"


@dataclass(frozen=True)
class Spread:
    """One figure over runs: each run's value in run order, their mean, standard deviation and the mean's
    interval (None for one run)."""

    values: tuple[float, ...]
    mean: float
    sd: float | None
    interval: Interval | None

    @property
    def cv(self) -> float | None:
        """The runs' coefficient of variation, sd / |mean| (None for one run or a zero mean)."""
        return None if self.sd is None or self.mean == 0 else self.sd / abs(self.mean)


@dataclass(frozen=True)
class ArmDifference:
    """One figure in two arms: each arm's spread, mean(b) - mean(a), its interval, and (b - a) / a."""

    a: Spread
    b: Spread
    difference: float
    interval: Interval | None
    change: float | None

    @property
    def distinguishable(self) -> bool | None:
        """Whether the interval excludes 0; None without an interval (fewer than 2 runs on a side)."""
        if self.interval is None:
            return None
        return self.interval.low > 0 or self.interval.high < 0


def spread(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Spread:
    """The runs' mean and its Student t interval (at least one value)."""
    if not values:
        raise ValueError("a spread needs at least one run's value")
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return Spread(tuple(values), mean, None, None)
    sd = statistics.stdev(values)
    half = student_t_quantile(1.0 - (1.0 - confidence) / 2.0, len(values) - 1) * sd / math.sqrt(len(values))
    return Spread(tuple(values), mean, sd, Interval(mean - half, mean + half, confidence, T_MEAN))


def welch_interval(a: Sequence[float], b: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval | None:
    """Welch's interval of mean(b) - mean(a); None unless both sides hold at least 2 values."""
    if len(a) < 2 or len(b) < 2:
        return None
    d = math.fsum(b) / len(b) - math.fsum(a) / len(a)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(d, d, confidence, WELCH)
    nu = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = student_t_quantile(1.0 - (1.0 - confidence) / 2.0, nu) * se
    return Interval(d - half, d + half, confidence, WELCH)


def arm_difference(a: Sequence[float], b: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> ArmDifference:
    """Both arms' spreads and the difference b - a with Welch's interval (each side at least one value)."""
    sa, sb = spread(a, confidence), spread(b, confidence)
    change = None if sa.mean == 0 else (sb.mean - sa.mean) / sa.mean
    return ArmDifference(sa, sb, sb.mean - sa.mean, welch_interval(a, b, confidence), change)


def abba_order(runs_per_arm: int, arms: tuple[str, str] = ("a", "b")) -> list[str]:
    """The arms' order, one run at a time: A B, B A, A B, ... (`runs_per_arm` pairs), so each arm holds each
    position of a pair equally often (one more either way for an odd count) and, for an even count, a linear
    drift falls on both arms alike."""
    first, second = arms
    return [arm for k in range(runs_per_arm) for arm in ((first, second) if k % 2 == 0 else (second, first))]


__all__ = [
    "T_MEAN",
    "WELCH",
    "ArmDifference",
    "Spread",
    "abba_order",
    "arm_difference",
    "spread",
    "welch_interval",
]
