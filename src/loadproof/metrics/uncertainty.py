"""Which interval a measured figure carries (docs/scenarios.md, "Intervals"): the choice, made once, for the
figures every scenario shares. The arithmetic is metrics/intervals.py's.

- A percentile of a latency (TTFT p99, ITL p50, E2E p90): the distribution-free order-statistic interval
  (`ranked_percentile_interval`); none when there are too few values for one at the confidence asked.
- A mean of a latency, in the order the requests ended: batch means (`batch_means_interval`), which keeps
  the time correlation of a loaded engine's latencies within a batch.
- A rate over a run (requests or tokens a second): batch means of its per-second series, scaled to the
  figure (the series' mean is the count over whole seconds, the figure the count over the exact duration).
- A share (SLO attainment, an SLO met, success): Wilson's score interval, in percent.

Every interval is at `CONFIDENCE` (95%) and deterministic, so `verify` recomputes it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadproof.metrics.distribution import EXACT_LIMIT, Histogram, Ranked
from loadproof.metrics.intervals import (
    DEFAULT_CONFIDENCE,
    Interval,
    batch_means_interval,
    ranked_percentile_interval,
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


def mean_interval(series: Sequence[float], factor: float = 1.0) -> Interval | None:
    """The mean's interval of values in time order, bounds times `factor`."""
    return scaled(batch_means_interval(series, CONFIDENCE), factor)


def share_interval(successes: int, n: int) -> Interval | None:
    """A share's interval in percent; none of no trials."""
    return scaled(wilson_interval(successes, n, CONFIDENCE), 100.0) if n > 0 else None


def per_second(ends_ns: Sequence[int], weights: Sequence[float], start_ns: int, duration_s: float) -> list[float]:
    """The weights (1 a request, or its tokens) summed in each whole second from `start_ns`, the last,
    partial second counted as a whole one only if it is at least half a second."""
    seconds = max(1, round(duration_s))
    bins = [0.0] * seconds
    for end, weight in zip(ends_ns, weights, strict=True):
        bins[min(seconds - 1, max(0, int((end - start_ns) // NS_PER_S)))] += weight
    return bins


def rate_interval(
    ends_ns: Sequence[int], weights: Sequence[float], start_ns: int, duration_s: float, value: float
) -> Interval | None:
    """A rate's interval (`value` = the weights' sum / duration_s): batch means of its per-second series,
    scaled so the series' mean is the figure."""
    if duration_s <= 0 or value <= 0:
        return None
    series = per_second(ends_ns, weights, start_ns, duration_s)
    mean = sum(series) / len(series)
    if mean <= 0:
        return None
    interval = batch_means_interval(series, CONFIDENCE)
    if interval is None:
        return None
    return Interval(
        max(0.0, interval.low) * value / mean,
        interval.high * value / mean,
        interval.confidence,
        f"{interval.method}, of the per-second series",
    )


__all__ = [
    "CONFIDENCE",
    "mean_interval",
    "per_second",
    "percentile_interval",
    "ranked",
    "rate_interval",
    "scaled",
    "share_interval",
]
