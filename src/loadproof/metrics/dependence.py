"""Correlated values: how many independent ones they are worth, and the percentile and share intervals that
follow (#41; measured in docs/benchmarks.md, section 12).

A loaded engine's latencies are not independent: requests that arrive in a burst share a long queue and a
large batch, so a run's TTFTs come in runs of high and low values. The order-statistic interval of a
percentile and Wilson's interval of a share assume independent values; on the simulator under load they
contained the truth in 5-88% of runs where they claim 95% (benchmarks.md). Both are kept, applied to the
values' **effective count** in place of their count.

**The effective count.** Of n values in time order, the quantity a percentile or a share counts is an
indicator: 1 when a value is at or below the estimated percentile (met the SLO), else 0. With independent
values the variance of its mean is s^2 / n, s^2 = p (1 - p) its own variance. Batch means (Schmeiser 1982,
as `intervals.batch_means_interval`) estimate the variance of the mean with the correlation kept: the
series cut into k = `BATCHES` consecutive batches, v = the sample variance of their means / k. The design
effect is D = v / (s^2 / n') (n' the values in the batches) and the effective count

    m = n / (D (t / z)^2),

t the Student t quantile with k - 1 degrees of freedom and z the normal one at the confidence asked: the t
accounts for v's own error (with k batches it is an estimate on k - 1 degrees of freedom), as batch means'
interval does, so an interval on m values has about the asked coverage when m is estimated. m is not capped
at n: where the batches agree more than independent values' would (by chance, or a series whose schedule
fixed its total), the interval is narrower than the one for n independent values, as batch means' own
would be (capped at n, independent values' intervals covered 97-99%); it is at most `MAX_GAIN` n. With fewer than
`MIN_VALUES` values (too few to see their correlation), or a constant indicator or batch means that agree
exactly (nothing to estimate), m = n: the values are taken as independent.

**Given a covariate** (`covariate`: one value a value, whose total the design fixed; a rescaled schedule's
arrivals, metrics/conditioning.py), v is the residual variance of the batch means regressed on the
covariate's, on k - 2 degrees of freedom (`intervals.batch_spread`), and t has k - 2: the part of the spread
that the fixed total cancels in the run's figure is left out; the method says so.

**A percentile** on m: the equal-tailed exact binomial ranks l and u for m values (`order_statistic_ranks`),
mapped to the n values in proportion, floor(l n / m) and ceil(u n / m) (so m = n is the plain interval);
none when m is below what the percentile needs (`min_count`: 368 for a p99).
**A share** on m: Wilson's score interval of the observed share with m trials.

Pure and deterministic (standard library and msgspec only): `verify` recomputes both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from loadproof.metrics.distribution import Ranked, quantile
from loadproof.metrics.intervals import (
    BATCHES,
    DEFAULT_CONFIDENCE,
    Interval,
    batch_spread,
    order_statistic_ranks,
    student_t_quantile,
)

MIN_VALUES = 100  # fewer values than this (fewer than 10 a batch): taken as independent
CONDITIONED = ", conditioned on each batch's arrivals"  # the method's words where a covariate was given
MAX_GAIN = 10.0  # the effective count is at most this many times the count (batch means that agree by chance)


def effective_count(
    series: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    batches: int = BATCHES,
    covariate: Sequence[float] | None = None,
) -> float:
    """How many independent values the `series` (in time order) is worth for the variance of its mean, with
    the t quantile's allowance for that variance's own error folded in; with a `covariate` whose total the
    design fixed (a rescaled schedule's arrivals), for the variance given it (`intervals.batch_spread`)."""
    n = len(series)
    if n < MIN_VALUES or batches < (3 if covariate is None else 4):
        return float(n)
    size = n // batches
    skip = n - batches * size
    kept = series[skip:]
    grand = math.fsum(kept) / len(kept)
    spread = math.fsum((x - grand) ** 2 for x in kept) / len(kept)  # the values' own variance
    if spread <= 0.0:
        return float(n)
    var, df = batch_spread(series, batches, covariate)
    design = var / batches / (spread / len(kept))
    if design <= 0.0:
        return float(n)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    t = student_t_quantile(0.5 + confidence / 2.0, df)
    return min(MAX_GAIN * n, n / (design * (t / z) ** 2))


def _below(values: Sequence[float], threshold: float) -> list[float]:
    return [1.0 if v <= threshold else 0.0 for v in values]


def correlated_percentile_interval(
    values: Sequence[float],
    ordered: Ranked,
    q: float,
    confidence: float = DEFAULT_CONFIDENCE,
    covariate: Sequence[float] | None = None,
) -> Interval | None:
    """The q-quantile's interval (q = p / 100) of `values` in time order (`ordered`: the same values ranked)
    on their effective count (given the `covariate`, one value a value, where the design fixed its total);
    None when that count is too small for the quantile at this confidence."""
    n = len(ordered)
    if n == 0 or len(values) != n:
        raise ValueError(f"the values ({len(values)}) and their ranking ({n}) must be the same, and some")
    m = effective_count(_below(values, quantile(ordered, q)), confidence, BATCHES, covariate)
    if covariate is not None:
        return on_effective_count(ordered, q, m, confidence, f" ({BATCHES} batches{CONDITIONED})")
    return on_effective_count(ordered, q, m, confidence, f" ({BATCHES} batches)", quiet=True)


def on_effective_count(
    ordered: Ranked, q: float, m: float, confidence: float, how: str, quiet: bool = False
) -> Interval | None:
    """The q-quantile's order-statistic interval of the `ordered` values for an effective count `m`: the ranks
    for floor(m) values mapped to the n in proportion; the method names the count and `how` it was made (not
    where it is n and `quiet`). None when the count is too small for the quantile at this confidence."""
    n = len(ordered)
    count = max(1, math.floor(m))
    ranks = order_statistic_ranks(count, q, confidence)
    if ranks is None:
        return None
    low = max(1, math.floor(ranks.low * n / count))
    high = min(n, math.ceil(ranks.high * n / count))
    method = f"order statistics {low} and {high} of {n}"
    if not (quiet and count == n):
        method += f", effective count {count}{how}"
    return Interval(float(ordered[low - 1]), float(ordered[high - 1]), confidence, method)


def correlated_share_interval(
    outcomes: Sequence[bool], confidence: float = DEFAULT_CONFIDENCE, covariate: Sequence[float] | None = None
) -> Interval | None:
    """Wilson's score interval of the share of true `outcomes` (in time order) on their effective count (given
    the `covariate`, as `correlated_percentile_interval`); None of no outcomes."""
    n = len(outcomes)
    if n == 0:
        return None
    successes = sum(outcomes)
    m = effective_count([1.0 if o else 0.0 for o in outcomes], confidence, BATCHES, covariate)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    share = successes / n
    z2m = z * z / m
    centre = (share + z2m / 2.0) / (1.0 + z2m)
    half = z / (1.0 + z2m) * math.sqrt(share * (1.0 - share) / m + z2m / (4.0 * m))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    if covariate is not None:
        method = f"Wilson score, effective count {m:.0f} of {n} ({BATCHES} batches{CONDITIONED})"
    else:
        method = "Wilson score" if m == n else f"Wilson score, effective count {m:.0f} of {n} ({BATCHES} batches)"
    return Interval(low, high, confidence, method)


__all__ = [
    "BATCHES",
    "MAX_GAIN",
    "MIN_VALUES",
    "correlated_percentile_interval",
    "correlated_share_interval",
    "effective_count",
    "on_effective_count",
]
