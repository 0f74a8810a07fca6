"""Percentiles as numpy.percentile's default (linear, type 7), std as numpy.std's (population), and the
histogram used above a million values within its stated error."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from loadproof.metrics import distribution
from loadproof.metrics.distribution import HISTOGRAM_RELATIVE_ERROR, Histogram, percentile, quantile, summarize


def test_a_hand_computed_case():
    values = [15, 20, 35, 40, 50]
    # numpy.percentile(values, p): h = (n - 1) p / 100, interpolated between neighbours
    assert percentile(values, 50) == 35
    assert percentile(values, 90) == pytest.approx(46.0)  # h = 3.6: 40 + 0.6 * 10
    assert percentile(values, 99) == pytest.approx(49.6)
    assert percentile(values, 99.9) == pytest.approx(49.96)
    assert percentile(values, 0) == 15 and percentile(values, 100) == 50
    assert percentile([7], 99) == 7
    summary = summarize([2, 4, 4, 4, 5, 5, 7, 9])
    assert summary.mean == 5 and summary.std == 2  # population std (numpy's ddof 0), not the sample's 2.14
    assert summary.max == 9 and summary.exact


def test_matches_the_inclusive_quantiles_of_the_standard_library_on_random_data():
    """statistics.quantiles(method="inclusive") is the same method as numpy's linear default."""
    rng = random.Random(17)
    for n in (2, 3, 10, 101, 1000):
        values = [rng.lognormvariate(0, 1) for _ in range(n)]
        ordered = sorted(values)
        expected = statistics.quantiles(values, n=100, method="inclusive")
        for p in range(1, 100):
            assert percentile(ordered, p) == pytest.approx(expected[p - 1], rel=1e-12)


def test_summarize_reports_every_stat_and_says_how():
    values = list(range(1, 1001))
    s = summarize(values)
    assert s is not None and s.count == 1000
    assert [s.stat(k) for k in ("p50", "p90", "p99", "p99_9", "max")] == pytest.approx(
        [500.5, 900.1, 990.01, 999.001, 1000]
    )
    assert "exact over 1000 values" in s.method
    assert summarize([]) is None


def test_the_histogram_is_within_its_stated_error():
    rng = random.Random(3)
    values = [rng.lognormvariate(-3, 1.5) for _ in range(200_000)] + [0.0] * 10
    ordered = sorted(values)
    histogram = Histogram(values)
    for p in (0.1, 1, 50, 90, 95, 99, 99.9, 99.99):
        exact = percentile(ordered, p)
        assert abs(histogram.percentile(p) - exact) <= HISTOGRAM_RELATIVE_ERROR * abs(exact) + 1e-15, p
    assert HISTOGRAM_RELATIVE_ERROR == 2**-11


def test_negative_values_keep_their_order_in_the_histogram():
    values = [-5.0, -1.0, 0.0, 2.0, 8.0]
    h = Histogram(values)
    got = [h.percentile(p) for p in (0, 25, 50, 75, 100)]
    assert got == pytest.approx(values, rel=HISTOGRAM_RELATIVE_ERROR)


def test_above_the_exact_limit_the_histogram_takes_over(monkeypatch):
    monkeypatch.setattr(distribution, "EXACT_LIMIT", 1000)
    values = [math.exp(i / 500) for i in range(5000)]
    s = summarize(values)
    assert s is not None and not s.exact and "within 0.05% of exact" in s.method
    assert s.mean == pytest.approx(statistics.fmean(values)) and s.max == max(values)  # still exact
    assert s.stat("p99") == pytest.approx(percentile(sorted(values), 99), rel=HISTOGRAM_RELATIVE_ERROR)


def test_the_quantile_is_the_percentile_at_a_hundred_times_q():
    """One method for both (the A/B bootstrap's interval reads `quantile`): numpy's linear default."""
    assert quantile([15, 20, 35, 40, 50], 0.9) == pytest.approx(46.0)  # h = 3.6: 40 + 0.6 * 10
    assert quantile([7], 0.025) == 7 and quantile([1, 3], 1.0) == 3
    rng = random.Random(29)
    for n in (2, 5, 40, 2000):
        ordered = sorted(rng.gauss(0, 1) for _ in range(n))
        expected = statistics.quantiles(ordered, n=40, method="inclusive")  # every 2.5%
        assert [quantile(ordered, k / 40) for k in range(1, 40)] == pytest.approx(expected, rel=1e-12, abs=1e-15)
        assert quantile(ordered, 0.975) == pytest.approx(percentile(ordered, 97.5), rel=1e-12)
    with pytest.raises(ValueError):
        quantile([], 0.5)
