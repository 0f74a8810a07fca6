"""The interval helpers every scenario's figures share (metrics/uncertainty.py): a statistic's, a ratio of sums'
and a ratio of two medians'; each holds the figure it is an interval of, and each is none when the values are
too few for one at 95%."""

import random
import statistics

import pytest

from loadproof.metrics.distribution import summarize
from loadproof.metrics.intervals import min_count, wilson_interval
from loadproof.metrics.uncertainty import median_ratio_interval, ratio_interval, share_interval, stat_interval


def test_a_statistic_interval_is_order_statistics_for_a_percentile_batch_means_for_the_mean_none_else():
    rng = random.Random(11)
    values = [rng.lognormvariate(0.0, 0.5) for _ in range(400)]
    summary = summarize(values)
    assert summary is not None
    for stat in ("p50", "p90", "p99", "mean"):
        interval = stat_interval(values, stat)
        assert interval is not None and interval.low <= summary.stat(stat) <= interval.high, stat
    assert "order statistics" in stat_interval(values, "p50").method
    assert "batch means" in stat_interval(values, "mean").method
    assert stat_interval(values, "max") is None and stat_interval(values, "std") is None
    assert stat_interval(values[: min_count(0.5) - 1], "p50") is None
    scaled = stat_interval(values, "p50", 1000.0)
    assert scaled.low == pytest.approx(1000 * stat_interval(values, "p50").low)


def test_a_median_of_an_even_count_lies_inside_its_interval():
    values = [float(v) for v in (3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8)]
    interval = stat_interval(values, "p50")
    assert interval is not None and interval.low <= statistics.median(values) <= interval.high


def test_a_share_as_a_fraction_is_wilsons():
    interval = share_interval(7, 20, scale=1.0)
    wilson = wilson_interval(7, 20)
    assert interval is not None and (interval.low, interval.high) == (wilson.low, wilson.high)
    assert interval.low < 7 / 20 < interval.high


def test_a_ratio_of_sums_interval_holds_the_ratio_and_stays_within_its_bounds():
    rng = random.Random(5)
    prompts = [float(rng.randint(100, 2000)) for _ in range(200)]
    cached = [p * rng.choice((0.0, 0.5, 0.9, 1.0)) for p in prompts]
    ratio = 100 * sum(cached) / sum(prompts)
    interval = ratio_interval(cached, prompts, 100.0, ceiling=100.0)
    assert interval is not None and interval.low < ratio < interval.high
    assert 0.0 <= interval.low and interval.high <= 100.0
    assert "linearized ratio" in interval.method
    everything = ratio_interval(prompts, prompts, 100.0, ceiling=100.0)  # every token a hit: no spread
    assert everything is not None and everything.low == pytest.approx(100.0) and everything.high == 100.0
    assert ratio_interval(cached[:5], prompts[:5]) is None  # too few for three batches
    assert ratio_interval([1.0] * 10, [0.0] * 10) is None


def test_a_ratio_of_medians_holds_the_ratio_and_needs_both_medians():
    rng = random.Random(9)
    first = [rng.uniform(1.0, 2.0) for _ in range(60)]
    second = [rng.uniform(1.2, 2.4) for _ in range(60)]
    drift = statistics.median(second) / statistics.median(first) - 1
    interval = median_ratio_interval(second, first, shift=-1.0)
    assert interval is not None and interval.low < drift < interval.high
    assert interval.confidence == 0.95 and "Bonferroni" in interval.method
    assert median_ratio_interval(second, first[:5]) is None
    assert median_ratio_interval(second, [0.0] * 60) is None
