"""ITL's intervals where a rescaled schedule fixed the count, batched by the second each gap ended
(docs/scenarios.md, "Intervals"; measured in docs/benchmarks.md, section 12).

A request's ITL gaps are spread over its whole decode, and each is as long as the engine's step then, which the
requests decoding beside it set. Batched by request (the order requests ended), with each gap's covariate its
request's arrival gap, the batches' residual kept load carried across their edges that cancels over the run, and
the intervals held the truth in 98% of runs where they claim 95%. Here each gap is placed in the second it ended
(the token's arrival, from the schedule's start), and the statistic's linearized per-second series is regressed
on each second's ends, whose count the design fixed (`conditioning.RunCount`, as a whole run's rates are):

- the mean R = sum of gaps / their count n: z_t = (gaps' sum in second t - R x their count in t) / (n / T), T the
  seconds; the mean of z is 0 and its variance is R's (the delta method); R +/- t(k - 2) s_k / sqrt(k), s_k^2
  the residual variance of z's k batch means regressed on the ends' (`intervals.batch_spread`);
- a percentile: the same for the indicator of a gap at or below the estimate, whose share's variance against
  independent gaps' p (1 - p) / n is the design effect D; the effective count m = n / (D (t(k - 2) / z)^2) and
  the order-statistic ranks for m values, as `dependence.correlated_percentile_interval` makes them.

k = 10 batches of whole seconds (fewer for a short run, each at least 2 seconds; none below 4: the request
batches' intervals then). Pure and deterministic (standard library only): `verify` recomputes the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from loadproof.metrics.conditioning import RunCount
from loadproof.metrics.dependence import MAX_GAIN, on_effective_count
from loadproof.metrics.distribution import Ranked, quantile
from loadproof.metrics.intervals import BATCHES, MIN_BATCH, Interval, batch_spread, student_t_quantile
from loadproof.metrics.uncertainty import per_second

IN_TIME = "batches of seconds, conditioned on each second's ends"  # the method's words, after their count


def fits(run: RunCount) -> bool:
    """Whether the run is long enough for 4 batches of seconds (at least 8 s); a shorter one's ITL intervals are the
    request batches' (`dependence`, conditioned on each batch's arrivals)."""
    return min(BATCHES, max(1, round(run.duration_s)) // MIN_BATCH) >= 4


def _spread(values: Sequence[float], times_ns: Sequence[int], centre: float, run: RunCount) -> tuple[float, int, int]:
    """The variance of the values' mean about `centre` from their linearized per-second series (`per_second`, as a
    rate's) batched and regressed on each second's ends, its degrees of freedom and the batches (0, 0, 0 below 4
    batches)."""
    if not values or not fits(run):
        return 0.0, 0, 0
    sums = per_second(times_ns, values, run.start_ns, run.duration_s)
    counts = per_second(times_ns, [1.0] * len(values), run.start_ns, run.duration_s)
    ended = per_second(run.ends_ns, [1.0] * len(run.ends_ns), run.start_ns, run.duration_s)
    k = min(BATCHES, len(sums) // MIN_BATCH)
    scale = len(values) / len(sums)  # values a second
    z = [(y - centre * c) / scale for y, c in zip(sums, counts, strict=True)]
    var, df = batch_spread(z, k, ended)
    return var / k, df, k


def mean_in_time(values: Sequence[float], times_ns: Sequence[int], run: RunCount, confidence: float) -> Interval | None:
    """The mean's interval (see the module doc); None for fewer than 4 batches of seconds."""
    if not values:
        return None
    mean = math.fsum(values) / len(values)
    var, df, k = _spread(values, times_ns, mean, run)
    if k == 0:
        return None
    half = student_t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(var)
    seconds = max(1, round(run.duration_s)) // k
    how = (
        f"batch means, {k} batches of {seconds} s, of the per-second linearized mean, conditioned on each second's ends"
    )
    return Interval(mean - half, mean + half, confidence, f"{how}, Student t")


def percentile_in_time(
    values: Sequence[float], times_ns: Sequence[int], ordered: Ranked, q: float, run: RunCount, confidence: float
) -> Interval | None:
    """The q-quantile's interval (see the module doc); None for fewer than 4 batches of seconds or an effective
    count too small for the quantile at this confidence."""
    n = len(values)
    if n == 0:
        return None
    estimate = quantile(ordered, q)
    below = [1.0 if v <= estimate else 0.0 for v in values]
    share = math.fsum(below) / n
    var, df, k = _spread(below, times_ns, share, run)
    if k == 0:
        return None
    own = share * (1.0 - share) / n
    m = float(n)
    if own > 0.0 and var > 0.0:
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        t = student_t_quantile(0.5 + confidence / 2.0, df)
        m = min(MAX_GAIN * n, n / (var / own * (t / z) ** 2))
    return on_effective_count(ordered, q, m, confidence, f" ({k} {IN_TIME})")


__all__ = ["IN_TIME", "fits", "mean_in_time", "percentile_in_time"]
