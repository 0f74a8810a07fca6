"""Confidence intervals for measured figures (#41, the foundation; no claim carries one yet).

Three kinds, one per kind of figure, each returning a typed `Interval(low, high, confidence, method)`:

- **A percentile** (TTFT p99, E2E p90): `percentile_interval`, distribution-free, from two order
  statistics. Of n independent values, the count B at or below the true q-quantile is Binomial(n, q), so
  the l-th and u-th smallest values (1-based) bracket it with probability P(l <= B <= u - 1) =
  F(u - 1) - F(l - 1) whatever the law (continuous; with ties it is at least that). The ranks are
  chosen equal-tailed, Clopper-style: l the largest rank with F(l - 1) <= alpha / 2, u the smallest with
  F(u - 1) >= 1 - alpha / 2, so each side misses at most alpha / 2 and the coverage is at least the
  confidence asked (`order_statistic_ranks` gives the exact coverage, e.g. 96.48% for the median of 100).
  **When n is too small** for a rank to exist on a side (a p99 of fewer than 368 values at 95%), the
  interval is None, not the widest pair at a lower confidence: a bound that is not at the confidence
  asked is not printed as one. `min_count` says how many values it needs.
- **A share** (SLO attainment, success, prefix hits): `wilson_interval` (the score interval, close to
  the confidence asked on average) and `clopper_pearson_interval` (exact, at least the confidence asked
  for every true share), from the regularized incomplete beta `regularized_beta` (Lentz's continued
  fraction, Numerical Recipes' betacf, standard library only) and its inverse `beta_quantile`.
- **A mean or a rate of a time series** (ITL mean, tokens per second over a run's seconds):
  `block_bootstrap_mean`, the circular block bootstrap (Politis and Romano 1992): blocks of b consecutive
  values, wrapping at the end, so a resample keeps the series' correlation within b steps. b is
  `auto_block_length`: Politis and White's estimate of the optimal length from the series' own
  autocorrelations (c n^(1/3), the rate that minimises the variance estimate's error, Hall, Horowitz and
  Jing 1995, its constant c estimated), never below ceil(n^(1/3)) nor above n / 3;
  k = ceil(n / b) blocks a resample, its statistic the mean of its k b values; the interval is the
  percentile interval of `resamples` such means (the quantiles at each tail, metrics/distribution.py's
  method), seeded, so one seed always gives the same interval. It undercovers for short, strongly
  correlated series (docs/benchmarks.md, "Interval coverage").

`min_count(q, confidence)` is the fewest values for which the two-sided percentile interval exists;
`min_count_one_sided(q, confidence, exceedances)` is LoadGen's early-stopping count: the fewest values for
which, with at most `exceedances` of them above a bound, the bound is an upper bound of the q-quantile at
that confidence.

Standard library and msgspec only: `verify` reaches this package.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import NormalDist

import msgspec

from loadproof.metrics.distribution import Ranked, quantile

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
_EPS = 1e-15
_TINY = 1e-300
_MAX_TERMS = 10_000


class Interval(msgspec.Struct, frozen=True):
    """A confidence interval: [low, high] at `confidence` (the level asked), made by `method`."""

    low: float
    high: float
    confidence: float
    method: str


class Ranks(msgspec.Struct, frozen=True):
    """The order statistics (1-based ranks) that bracket a quantile, and their exact coverage."""

    low: int
    high: int
    coverage: float


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    return 1.0 - confidence


# --- the regularized incomplete beta and the binomial law ---------------------------------------------


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of I_x(a, b), by Lentz's method (converges fast for x < (a+1)/(a+b+2))."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS + 1):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge at x={x}, a={a}, b={b}")


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) = B(x; a, b) / B(a, b), for a, b > 0 and 0 <= x <= 1."""
    if a <= 0 or b <= 0:
        raise ValueError(f"the beta law needs a, b > 0, got a={a}, b={b}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def beta_quantile(p: float, a: float, b: float) -> float:
    """The x with I_x(a, b) = p, by bisection (I_x is increasing in x): within 1e-15 of it."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if regularized_beta(mid, a, b) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return (lo + hi) / 2.0


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(B <= k) for B ~ Binomial(n, p): I_{1-p}(n - k, k + 1)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    return regularized_beta(1.0 - p, n - k, k + 1)


def _smallest_k(n: int, p: float, target: float) -> int:
    """The smallest k in [-1, n] with binomial_cdf(k, n, p) >= target (the cdf is increasing in k)."""
    lo, hi = -1, n  # cdf(-1) = 0, cdf(n) = 1
    if target <= 0.0:
        return -1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if binomial_cdf(mid, n, p) >= target:
            hi = mid
        else:
            lo = mid
    return hi


# --- percentiles: order statistics ----------------------------------------------------------------------


def order_statistic_ranks(n: int, q: float, confidence: float = DEFAULT_CONFIDENCE) -> Ranks | None:
    """The equal-tailed ranks l < u (1-based) whose values bracket the q-quantile of n values with
    probability at least `confidence`; None when n is too small for either rank to exist."""
    alpha = _check_confidence(confidence)
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be between 0 and 1, got {q}")
    if n < 1:
        return None
    tail = alpha / 2.0
    # l - 1 = the largest k with F(k) <= tail: one below the smallest k with F(k) > tail
    below = _smallest_k(n, q, math.nextafter(tail, 1.0)) - 1
    upper = _smallest_k(n, q, 1.0 - tail)  # u - 1
    low_rank, high_rank = below + 1, upper + 1
    if low_rank < 1 or high_rank > n:
        return None
    coverage = binomial_cdf(upper, n, q) - binomial_cdf(below, n, q)
    return Ranks(low_rank, high_rank, coverage)


def percentile_interval(values: Sequence[float], q: float, confidence: float = DEFAULT_CONFIDENCE) -> Interval | None:
    """The distribution-free interval of the q-quantile (q = p / 100) of independent values; None when
    there are too few of them (`min_count`)."""
    return ranked_percentile_interval(sorted(values), q, confidence)


def ranked_percentile_interval(ordered: Ranked, q: float, confidence: float = DEFAULT_CONFIDENCE) -> Interval | None:
    """`percentile_interval` of values already in ascending order (a sorted list, or a `Histogram`, whose
    ranks stand for their buckets' middles)."""
    ranks = order_statistic_ranks(len(ordered), q, confidence)
    if ranks is None:
        return None
    low, high = float(ordered[ranks.low - 1]), float(ordered[ranks.high - 1])
    return Interval(low, high, confidence, f"order statistics {ranks.low} and {ranks.high} of {len(ordered)}")


def min_count(q: float, confidence: float = DEFAULT_CONFIDENCE) -> int:
    """The fewest values for which `percentile_interval` of the q-quantile exists: both the smallest and the
    largest value miss at most alpha / 2, q^n <= alpha / 2 and (1 - q)^n <= alpha / 2."""
    alpha = _check_confidence(confidence)
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be between 0 and 1, got {q}")
    tail = alpha / 2.0
    n = max(1, math.ceil(math.log(tail) / math.log(max(q, 1.0 - q))))
    while order_statistic_ranks(n, q, confidence) is None:  # guards the logarithms' last rounding step
        n += 1
    while n > 1 and order_statistic_ranks(n - 1, q, confidence) is not None:
        n -= 1
    return n


def min_count_one_sided(q: float, confidence: float = DEFAULT_CONFIDENCE, exceedances: int = 0) -> int:
    """LoadGen's early-stopping count: the fewest n such that, when at most `exceedances` of n values lie
    above a bound, the bound is above the q-quantile with probability `confidence`: P(B <= n - e - 1) >=
    confidence, B ~ Binomial(n, q), i.e. the (n - e)-th smallest value is an upper bound at that level."""
    _check_confidence(confidence)
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be between 0 and 1, got {q}")
    if exceedances < 0:
        raise ValueError(f"exceedances must be >= 0, got {exceedances}")

    def enough(n: int) -> bool:
        return binomial_cdf(n - exceedances - 1, n, q) >= confidence

    hi = exceedances + 1
    while not enough(hi):  # the probability grows with n for a fixed count above
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:  # lo not enough (or below e + 1), hi enough
        mid = (lo + hi) // 2
        if mid > exceedances and enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


# --- shares ---------------------------------------------------------------------------------------------


def _check_counts(successes: int, n: int) -> None:
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"a share needs 0 <= successes <= n and n >= 1, got {successes} of {n}")


def wilson_interval(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """Wilson's score interval of a share successes / n."""
    alpha = _check_confidence(confidence)
    _check_counts(successes, n)
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    share = successes / n
    z2n = z * z / n
    centre = (share + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(share * (1.0 - share) / n + z2n / (4.0 * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exactly 0 and 1 at the ends, not a rounding off
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high, confidence, "Wilson score")


def clopper_pearson_interval(successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """The exact (Clopper-Pearson) interval of a share: the beta quantiles at alpha / 2 and 1 - alpha / 2."""
    alpha = _check_confidence(confidence)
    _check_counts(successes, n)
    low = 0.0 if successes == 0 else beta_quantile(alpha / 2.0, successes, n - successes + 1)
    high = 1.0 if successes == n else beta_quantile(1.0 - alpha / 2.0, successes + 1, n - successes)
    return Interval(low, high, confidence, "Clopper-Pearson")


# --- means of a time series: the circular block bootstrap ------------------------------------------------


def block_length(n: int) -> int:
    """The least block length of a series of n values: ceil(n^(1/3)), at least 1."""
    return max(1, math.ceil(round(math.cbrt(n), 9)))


def _autocovariances(series: Sequence[float], lags: int) -> list[float]:
    n = len(series)
    mean = math.fsum(series) / n
    centred = [x - mean for x in series]
    return [math.fsum(centred[i] * centred[i + k] for i in range(n - k)) / n for k in range(lags + 1)]


def _flat_top_sums(series: Sequence[float]) -> tuple[float, float] | None:
    """Politis and White's (2004) flat-top sums of a series' autocovariances: g (the long-run variance, n
    times the variance of the mean) and G (|k| times each lag's), or None for too short or a constant
    series. The correlation's reach m is the first lag after which K = max(5, sqrt(log10 n))
    autocorrelations in a row are within 2 sqrt(log10 n / n) of 0; the sums run over lags up to M = 2 m,
    weighted 1 to M / 2, falling linearly to 0 at M."""
    n = len(series)
    if n < 8:
        return None
    reach = max(1, min(n // 2 - 1, 2 * math.ceil(math.sqrt(n))))
    gammas = _autocovariances(series, reach)
    if gammas[0] <= 0.0:
        return None
    rho = [g / gammas[0] for g in gammas]
    log_n = math.log10(n)
    threshold = 2.0 * math.sqrt(log_n / n)
    run = max(5, math.ceil(math.sqrt(log_n)))
    m = next(
        (k - 1 for k in range(1, reach - run + 2) if all(abs(rho[j]) < threshold for j in range(k, k + run))),
        reach // 2,
    )
    lags = min(2 * max(m, 1), reach)
    g = big_g = 0.0
    for k in range(-lags, lags + 1):
        t = abs(k) / lags
        weight = 1.0 if t <= 0.5 else 2.0 * (1.0 - t)
        g += weight * gammas[abs(k)]
        big_g += weight * abs(k) * gammas[abs(k)]
    return (g, big_g) if g > 0.0 else None


def auto_block_length(series: Sequence[float]) -> int:
    """The circular block bootstrap's block length for this series: Politis and White's (2004) estimate of
    the optimal length with Patton, Politis and White's (2009) correction, (2 G^2 / ((4/3) g^2))^(1/3)
    n^(1/3) (`_flat_top_sums`), never below `block_length` and at most n / 3."""
    n = len(series)
    floor = block_length(n)
    sums = _flat_top_sums(series)
    if sums is None:
        return floor
    g, big_g = sums
    estimate = math.cbrt(2.0 * big_g * big_g / (4.0 / 3.0 * g * g) * n)
    return max(floor, min(math.ceil(estimate), max(floor, n // 3)))


def long_run_mean_interval(series: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval | None:
    """The mean of a correlated series plus or minus z sqrt(g / n), g its flat-top long-run variance
    (`_flat_top_sums`): the block bootstrap's documented equivalent, without its downward bias of about
    G / b in the variance; None for fewer than 8 values or a constant series."""
    alpha = _check_confidence(confidence)
    sums = _flat_top_sums(series)
    if sums is None:
        return None
    n = len(series)
    mean = math.fsum(series) / n
    half = NormalDist().inv_cdf(1.0 - alpha / 2.0) * math.sqrt(sums[0] / n)
    return Interval(mean - half, mean + half, confidence, "flat-top long-run variance")


def block_bootstrap_mean(
    series: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    block: int | None = None,
) -> Interval | None:
    """The circular block bootstrap's percentile interval of the mean of `series`, in time order; None for
    fewer than two values. `block` overrides `auto_block_length`."""
    alpha = _check_confidence(confidence)
    n = len(series)
    if n < 2:
        return None
    b = auto_block_length(series) if block is None else block
    if not 1 <= b <= n:
        raise ValueError(f"the block length must be between 1 and {n}, got {b}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    # the sum of each circular block, from the running sums of the series doubled
    running = [0.0]
    for value in (*series, *series[: b - 1]):
        running.append(running[-1] + value)
    sums = [running[i + b] - running[i] for i in range(n)]
    k = math.ceil(n / b)
    rng = random.Random(seed)
    draw = rng.choices
    means = sorted(sum(draw(sums, k=k)) / (k * b) for _ in range(resamples))
    tail = alpha / 2.0
    method = f"circular block bootstrap, block {b}, {resamples} resamples, seed {seed}"
    return Interval(quantile(means, tail), quantile(means, 1.0 - tail), confidence, method)


# --- batch means: a mean of a correlated series, Student's t over its batches ---------------------------

# batch means' batches: few and long, so a loaded engine's bursts stay within one (docs/benchmarks.md, section 12:
# 10 held a correlated series' mean closer to 95% than 20), with 9 degrees of freedom for Student's t
BATCHES = 10
MIN_BATCH = 2


def student_t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom, from the incomplete beta:
    P(|T| > t) = I_x(df / 2, 1 / 2) with x = df / (df + t^2)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"p must be between 0 and 1 and df positive, got p={p}, df={df}")
    if p == 0.5:
        return 0.0
    tail = 2.0 * min(p, 1.0 - p)
    x = beta_quantile(tail, df / 2.0, 0.5)
    t = math.sqrt(df * (1.0 / x - 1.0)) if x > 0.0 else math.inf
    return t if p > 0.5 else -t


def batch_spread(series: Sequence[float], k: int, covariate: Sequence[float] | None = None) -> tuple[float, int]:
    """The variance of one batch's mean of `series` cut into k equal consecutive batches (the first n mod k values
    in none) and its degrees of freedom: the k batch means' sample variance on k - 1; with a `covariate` (one
    value a series value: what drove it, a request's arrival gap, a second's sends), the residual variance of
    the batch means regressed by least squares on the covariate's batch means, on k - 2, the part of their
    spread the covariate does not explain. That is the variance of the series' mean where the design fixes the
    covariate's total (a rescaled schedule fixes its count and span): a control variate whose mean is known,
    and the same as the batch means' where the covariate does not vary."""
    n = len(series)
    if k < 3 or n < k or (covariate is not None and (len(covariate) != n or k < 4)):
        raise ValueError(f"{n} values ({None if covariate is None else len(covariate)} covariates) in {k} batches")
    size = n // k
    skip = n - k * size

    def means(values: Sequence[float]) -> list[float]:
        return [math.fsum(values[skip + i * size : skip + (i + 1) * size]) / size for i in range(k)]

    ys = means(series)
    middle = math.fsum(ys) / k
    if covariate is None:
        return math.fsum((y - middle) ** 2 for y in ys) / (k - 1), k - 1
    xs = means(covariate)
    centre = math.fsum(xs) / k
    sxx = math.fsum((x - centre) ** 2 for x in xs)
    slope = math.fsum((x - centre) * (y - middle) for x, y in zip(xs, ys, strict=True)) / sxx if sxx > 0 else 0.0
    residuals = [y - middle - slope * (x - centre) for x, y in zip(xs, ys, strict=True)]
    return math.fsum(r * r for r in residuals) / (k - 2), k - 2


def batch_means_interval(
    series: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    batches: int = BATCHES,
    covariate: Sequence[float] | None = None,
) -> Interval | None:
    """The mean of a series in time order with the non-overlapping batch means interval: the series cut into
    k equal consecutive batches (the first n mod k values left out of the batching, not of the mean), the
    batches' means near independent when a batch is much longer than the series' correlation, so the mean
    +/- t(k - 1) s_k / sqrt(k), s_k the batch means' standard deviation (Schmeiser 1982; k = 10 by default,
    fewer for a short series, each batch at least `MIN_BATCH` values). With a `covariate` whose total the
    design fixed, conditioned on it: s_k the residual's, t on k - 2 (`batch_spread`). None for fewer than 3
    batches' values (4 with a covariate); a constant series gives a zero-width interval."""
    alpha = _check_confidence(confidence)
    n = len(series)
    k = min(batches, n // MIN_BATCH)
    if k < (3 if covariate is None else 4):
        return None
    size = n // k
    var, df = batch_spread(series, k, covariate)
    grand = math.fsum(series) / n
    half = student_t_quantile(1.0 - alpha / 2.0, df) * math.sqrt(var / k)
    how = "" if covariate is None else ", conditioned on each batch's arrivals"
    return Interval(grand - half, grand + half, confidence, f"batch means, {k} batches of {size}{how}, Student t")
