"""Which interval a measured figure carries (docs/scenarios.md, "Intervals"): the choice, made once, for the
figures every scenario shares. The arithmetic is metrics/intervals.py's.

- A percentile of a latency (TTFT p99, ITL p50, E2E p90): the distribution-free order-statistic interval on
  the values' effective count (`dependence.correlated_percentile_interval`: a loaded engine's latencies come
  in bursts, and the values in the order given are worth fewer independent ones); none when there are too
  few for one at the confidence asked.
- A mean of a latency, in the order the requests ended: batch means (`batch_means_interval`), which keeps
  the time correlation of a loaded engine's latencies within a batch.
- A rate over a run (requests or tokens a second): batch means of its per-second series, scaled to the
  figure (the series' mean is the count over whole seconds, the figure the count over the exact duration);
  a whole run's rate where a rescaled schedule fixed the count, conditioned on each second's ends, with the
  drain's spread added (`conditioning.RunCount`).
- A share of independent trials (an accuracy over items, success): Wilson's score interval, in percent (or as
  a fraction, `scale=1`); of outcomes in time order (SLO attainment, an SLO met, `outcomes`), on their
  effective count (`dependence.correlated_share_interval`).
- A ratio of two sums over requests (a hit share of prompt tokens, seconds per audio second): batch means of
  its linearized per-request values (`ratio_interval`), the delta method's variance with the time correlation
  kept; tokens of one request are not independent trials, so no binomial interval.
- A ratio of two medians (a drift, warm over cold): each median's order statistics at 97.5%, so both hold
  together at least at 95% whatever their dependence (Bonferroni), the ratio's bounds the extreme ratios.

Every interval is at `CONFIDENCE` (95%) and deterministic, so `verify` recomputes it exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from loadproof.metrics.conditioning import DrainLaw, RunCount
from loadproof.metrics.dependence import correlated_percentile_interval, correlated_share_interval
from loadproof.metrics.distribution import EXACT_LIMIT, PERCENTILES, Histogram, Ranked
from loadproof.metrics.intervals import (
    BATCHES,
    DEFAULT_CONFIDENCE,
    MIN_BATCH,
    Interval,
    batch_means_interval,
    batch_spread,
    ranked_percentile_interval,
    student_t_quantile,
    wilson_interval,
)
from loadproof.units import NS_PER_S

CONFIDENCE = DEFAULT_CONFIDENCE


def scaled(interval: Interval | None, factor: float) -> Interval | None:
    """The interval with both bounds times `factor` (> 0): ns to s, a share to percent."""
    if interval is None:
        return None
    return Interval(interval.low * factor, interval.high * factor, interval.confidence, interval.method)


def ranked(values: Sequence[float]) -> Ranked:
    """The values in ascending order, as `summarize` reads them: sorted, or a histogram above `EXACT_LIMIT`."""
    return sorted(values) if len(values) <= EXACT_LIMIT else Histogram(values)


def percentile_interval(ordered: Ranked, p: float, factor: float = 1.0) -> Interval | None:
    """The p-th percentile's interval (p in percent), bounds times `factor`."""
    return scaled(ranked_percentile_interval(ordered, p / 100.0, CONFIDENCE), factor)


def mean_interval(
    series: Sequence[float], factor: float = 1.0, covariate: Sequence[float] | None = None
) -> Interval | None:
    """The mean's interval of values in time order, bounds times `factor` (given the `covariate`: conditioned on
    each batch's arrivals)."""
    return scaled(batch_means_interval(series, CONFIDENCE, covariate=covariate), factor)


def stat_interval(
    values: Sequence[float],
    stat: str,
    factor: float = 1.0,
    ordered: Ranked | None = None,
    covariate: Sequence[float] | None = None,
) -> Interval | None:
    """The interval of a statistic of `values` as `distribution.summarize` names it: a percentile's (p50 is the
    median) by order statistics on the values' effective count in the order given (`ordered`: the values
    already `ranked`), the mean's by batch means over the values in the order given; none for the std, the
    min or the max. With a `covariate` (one value a value: its request's arrival gap, `conditioning`), both
    conditioned on each batch's arrivals."""
    if stat in PERCENTILES:
        ranks = ranked(values) if ordered is None else ordered
        q = PERCENTILES[stat] / 100.0
        interval = correlated_percentile_interval(values, ranks, q, CONFIDENCE, covariate) if values else None
        return scaled(interval, factor)
    return mean_interval(values, factor, covariate) if stat == "mean" else None


def share_interval(
    successes: int,
    n: int,
    scale: float = 100.0,
    outcomes: Sequence[bool] | None = None,
    covariate: Sequence[float] | None = None,
) -> Interval | None:
    """A share's interval, in percent (`scale` 1: as a fraction); none of no trials. With `outcomes` (the n
    trials in time order, `successes` of them true), on their effective count (given the `covariate`, one value
    an outcome, conditioned on each batch's arrivals)."""
    if outcomes is not None:
        if len(outcomes) != n or sum(outcomes) != successes:
            raise ValueError(f"{len(outcomes)} outcomes, {sum(outcomes)} true, for a share of {successes} of {n}")
        return scaled(correlated_share_interval(outcomes, CONFIDENCE, covariate), scale)
    return scaled(wilson_interval(successes, n, CONFIDENCE), scale) if n > 0 else None


def ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], factor: float = 1.0, ceiling: float | None = None
) -> Interval | None:
    """The interval of R = sum(numerators) / sum(denominators) x `factor`, one pair an item, in time order:
    batch means of the linearized values (y_i - R x_i) / mean(x), whose mean is 0 and whose mean's variance
    is R's (the delta method), so R plus their interval; bounds at least 0 and at most `ceiling` where given
    (a share of 100). None without a positive denominator or with too few items for three batches."""
    total = math.fsum(denominators)
    if not numerators or total <= 0:
        return None
    ratio = math.fsum(numerators) / total
    mean_den = total / len(denominators)
    linear = [(y - ratio * x) / mean_den for y, x in zip(numerators, denominators, strict=True)]
    interval = batch_means_interval(linear, CONFIDENCE)
    if interval is None:
        return None
    low, high = max(0.0, (ratio + interval.low) * factor), (ratio + interval.high) * factor
    high = high if ceiling is None else min(ceiling, high)
    return Interval(low, high, interval.confidence, f"{interval.method}, of the linearized ratio")


def _two_medians(first: Sequence[float], second: Sequence[float]) -> tuple[Interval, Interval, str] | None:
    """Each median's order-statistic interval at 1 - (1 - CONFIDENCE) / 2, so both hold together at least at
    CONFIDENCE whatever their dependence (Bonferroni), and the method's words; None if either has too few."""
    level = 1.0 - (1.0 - CONFIDENCE) / 2.0
    one = ranked_percentile_interval(ranked(first), 0.5, level)
    two = ranked_percentile_interval(ranked(second), 0.5, level)
    if one is None or two is None:
        return None
    return one, two, f"two medians' intervals at {level:.1%} each (Bonferroni): {one.method}; {two.method}"


def median_ratio_interval(
    numerator: Sequence[float], denominator: Sequence[float], shift: float = 0.0
) -> Interval | None:
    """The interval of median(numerator) / median(denominator) + `shift`, the extreme ratios of the two medians'
    intervals (`_two_medians`); None when either has too few values or the denominator's could be 0."""
    both = _two_medians(numerator, denominator)
    if both is None or both[1].low <= 0 or both[0].low < 0:
        return None
    top, bottom, how = both
    return Interval(top.low / bottom.high + shift, top.high / bottom.low + shift, CONFIDENCE, f"ratio of {how}")


def median_difference_interval(first: Sequence[float], second: Sequence[float]) -> Interval | None:
    """The interval of median(first) - median(second), the extreme differences of the two medians' intervals
    (`_two_medians`); None when either has too few values."""
    both = _two_medians(first, second)
    if both is None:
        return None
    one, two, how = both
    return Interval(one.low - two.high, one.high - two.low, CONFIDENCE, f"difference of {how}")


def per_second(ends_ns: Sequence[int], weights: Sequence[float], start_ns: int, duration_s: float) -> list[float]:
    """The weights (1 a request, or its tokens) summed in each whole second from `start_ns`, the last,
    partial second counted as a whole one only if it is at least half a second."""
    seconds = max(1, round(duration_s))
    bins = [0.0] * seconds
    for end, weight in zip(ends_ns, weights, strict=True):
        bins[min(seconds - 1, max(0, int((end - start_ns) // NS_PER_S)))] += weight
    return bins


def rate_interval(
    ends_ns: Sequence[int],
    weights: Sequence[float],
    start_ns: int,
    duration_s: float,
    value: float,
    sends_ns: Sequence[int] | None = None,
    run: RunCount | None = None,
) -> Interval | None:
    """A rate's interval (`value` = the weights' sum / duration_s): batch means of its per-second series,
    scaled so the series' mean is the figure; with `sends_ns` (a rescaled schedule's sends, whose count the
    design fixed), conditioned on the per-second series of sends over the same seconds; a whole run's rate with
    `run` (its ends and drain, `conditioning.RunCount`), by `_whole_run` instead."""
    if duration_s <= 0 or value <= 0:
        return None
    series = per_second(ends_ns, weights, start_ns, duration_s)
    mean = sum(series) / len(series)
    if mean <= 0:
        return None
    if run is not None:
        ends = per_second(run.ends_ns, [1.0] * len(run.ends_ns), start_ns, duration_s)
        return _whole_run(series, ends, value / mean, duration_s, run.drain)
    sends = None if sends_ns is None else per_second(sends_ns, [1.0] * len(sends_ns), start_ns, duration_s)
    interval = batch_means_interval(series, CONFIDENCE, covariate=sends)
    if interval is None:
        return None
    return Interval(
        max(0.0, interval.low) * value / mean,
        interval.high * value / mean,
        interval.confidence,
        f"{interval.method}, of the per-second series",
    )


def _whole_run(
    series: list[float], ends: list[float], factor: float, duration_s: float, drain: DrainLaw
) -> Interval | None:
    """A whole run's rate whose count the design fixed (`conditioning.RunCount`): the per-second `series`' batch
    means regressed on the batch means of each second's `ends` (`intervals.batch_spread`, k - 2 degrees of
    freedom), their relative variance a; the drain's, drain_var / duration^2, b (the figure is a sum over the
    schedule's span plus the drain); the figure +/- t s with s^2 = (a + b) figure^2 and t on Satterthwaite's
    degrees of freedom (a + b)^2 / (a^2 / (k - 2)), the normal quantile where a is 0 (a count of requests, which
    the ends explain whole). `factor` = figure / the series' mean. None for fewer than 4 batches. (The drain's law
    is skewed, but its own points in place of +/- t s held the expectation less often: the law's upper tail, drawn
    from the run's last tenth, is short.)"""
    k = min(BATCHES, len(series) // MIN_BATCH)
    if k < 4:
        return None
    mean = math.fsum(series) / len(series)
    var, df = batch_spread(series, k, ends)
    a, b = var / k / (mean * mean), drain.var_s2 / (duration_s * duration_s)
    value = mean * factor
    if a <= 1e-12 * (a + b) or a + b <= 0:
        quantile, how = NormalDist().inv_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0), "normal"
    else:
        dof = df * (a + b) ** 2 / (a * a)
        quantile, how = student_t_quantile(1.0 - (1.0 - CONFIDENCE) / 2.0, dof), f"Student t on {dof:.1f} df"
    half = quantile * math.sqrt(a + b) * value
    method = (
        f"batch means, {k} batches of {len(series) // k}, of the per-second series, conditioned on each second's "
        f"ends, with the drain's spread, {how}"
    )
    return Interval(max(0.0, value - half), value + half, CONFIDENCE, method)


__all__ = [
    "CONFIDENCE",
    "mean_interval",
    "median_difference_interval",
    "median_ratio_interval",
    "per_second",
    "percentile_interval",
    "ranked",
    "rate_interval",
    "ratio_interval",
    "scaled",
    "share_interval",
    "stat_interval",
]
