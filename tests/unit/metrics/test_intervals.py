"""metrics/intervals.py: known values, widths that move the right way, and a small coverage check."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from loadproof.metrics.intervals import (
    auto_block_length,
    beta_quantile,
    binomial_cdf,
    block_bootstrap_mean,
    block_length,
    clopper_pearson_interval,
    long_run_mean_interval,
    min_count,
    min_count_one_sided,
    order_statistic_ranks,
    percentile_interval,
    regularized_beta,
    wilson_interval,
)


def exact_beta(x: Fraction, a: int, b: int) -> float:
    """I_x(a, b) for whole a, b: P(Binomial(a + b - 1, x) >= a), in exact arithmetic."""
    n = a + b - 1
    return float(sum(math.comb(n, j) * x**j * (1 - x) ** (n - j) for j in range(a, n + 1)))


@pytest.mark.parametrize(
    ("x", "a", "b"),
    [("2/5", 2, 3), ("1/10", 1, 30), ("9/10", 30, 2), ("1/2", 50, 50), ("3/10", 200, 500), ("99/100", 990, 10)],
)
def test_regularized_beta_matches_the_binomial_sum(x: str, a: int, b: int) -> None:
    assert regularized_beta(float(Fraction(x)), a, b) == pytest.approx(
        exact_beta(Fraction(x), a, b), rel=1e-10, abs=1e-14
    )


def test_regularized_beta_closed_forms() -> None:
    assert regularized_beta(0.4, 2, 3) == pytest.approx(0.5248, abs=1e-14)
    assert regularized_beta(0.3, 0.5, 0.5) == pytest.approx(2 / math.pi * math.asin(math.sqrt(0.3)), abs=1e-12)
    assert regularized_beta(0.25, 2.5, 1) == pytest.approx(0.25**2.5, abs=1e-14)  # I_x(a, 1) = x^a
    assert regularized_beta(0.5, 500, 500) == pytest.approx(0.5, abs=1e-10)
    assert regularized_beta(0.0, 3, 4) == 0.0 and regularized_beta(1.0, 3, 4) == 1.0
    with pytest.raises(ValueError):
        regularized_beta(0.5, 0, 1)


def test_beta_quantile_inverts() -> None:
    for p in (0.001, 0.025, 0.5, 0.975, 0.999):
        assert regularized_beta(beta_quantile(p, 8, 3), 8, 3) == pytest.approx(p, abs=1e-12)


def test_binomial_cdf() -> None:
    assert binomial_cdf(39, 100, 0.5) == pytest.approx(0.017600, abs=1e-6)
    assert binomial_cdf(60, 100, 0.5) == pytest.approx(0.982400, abs=1e-6)
    assert binomial_cdf(-1, 10, 0.3) == 0.0 and binomial_cdf(10, 10, 0.3) == 1.0


def test_wilson_for_8_of_10() -> None:
    eight = wilson_interval(8, 10)
    assert (eight.low, eight.high) == (pytest.approx(0.4902, abs=5e-5), pytest.approx(0.9433, abs=5e-5))
    assert (eight.confidence, eight.method) == (0.95, "Wilson score")
    zero = wilson_interval(0, 10)
    assert zero.low == 0.0 and zero.high == pytest.approx(0.2775, abs=5e-5)


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),  # published exact binomial limits (Clopper and Pearson 1934; Conover's table A4)
    [
        (8, 10, 0.4439, 0.9748),
        (0, 10, 0.0, 0.3085),
        (5, 10, 0.1871, 0.8129),
        (10, 10, 0.6915, 1.0),
        (1, 20, 0.0013, 0.2487),
    ],
)
def test_clopper_pearson_against_tables(k: int, n: int, low: float, high: float) -> None:
    got = clopper_pearson_interval(k, n)
    assert (got.low, got.high) == (pytest.approx(low, abs=5e-5), pytest.approx(high, abs=5e-5))
    assert got.method == "Clopper-Pearson" and got.confidence == 0.95


def test_share_intervals_narrow_with_n_and_widen_with_confidence() -> None:
    for interval in (wilson_interval, clopper_pearson_interval):
        widths = [interval(8 * m, 10 * m).high - interval(8 * m, 10 * m).low for m in (1, 4, 16, 64)]
        assert widths == sorted(widths, reverse=True)
        levels = [interval(80, 100, c) for c in (0.8, 0.9, 0.95, 0.99)]
        assert [i.high - i.low for i in levels] == sorted(i.high - i.low for i in levels)
        assert all(i.low <= 0.8 <= i.high for i in levels)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_order_statistic_ranks_for_100_values() -> None:
    median = order_statistic_ranks(100, 0.5)
    assert median is not None and (median.low, median.high) == (40, 61)  # the textbook ranks
    assert median.coverage == pytest.approx(0.9648, abs=5e-5)
    assert order_statistic_ranks(100, 0.99) is None  # a p99 of 100 values has no 97.5% upper bound
    assert order_statistic_ranks(100, 0.99, 0.5) is None  # 0.99^100 = 0.366 > 0.25
    assert order_statistic_ranks(100, 0.99, 0.2) is not None
    p99 = order_statistic_ranks(1000, 0.99)
    assert p99 is not None and (p99.low, p99.high) == (983, 997) and p99.coverage >= 0.95


def test_minimum_counts() -> None:
    assert min_count(0.99) == 368  # 0.99^n <= 0.025
    assert order_statistic_ranks(367, 0.99) is None and order_statistic_ranks(368, 0.99) is not None
    assert min_count(0.5) == 6 and min_count(0.999) == 3688
    assert min_count_one_sided(0.99, 0.95) == 299  # 1 - 0.99^n >= 0.95
    assert min_count_one_sided(0.99, 0.99) == 459
    one_over = min_count_one_sided(0.99, 0.95, exceedances=1)
    assert binomial_cdf(one_over - 2, one_over, 0.99) >= 0.95 > binomial_cdf(one_over - 3, one_over - 1, 0.99)


def test_percentile_interval_widths_shrink_with_n() -> None:
    widths = []
    for n in (400, 1000, 4000):  # the exponential law's quantiles at (i + 1/2) / n: a sample without noise
        interval = percentile_interval([-math.log(1 - (i + 0.5) / n) for i in range(n)], 0.99)
        assert interval is not None and interval.low <= interval.high
        widths.append(interval.high - interval.low)
    assert widths == sorted(widths, reverse=True)
    assert percentile_interval([float(i) for i in range(100)], 0.99) is None


def test_block_lengths() -> None:
    assert [block_length(n) for n in (1, 8, 27, 28, 300)] == [1, 2, 3, 4, 7]
    rng = random.Random(3)
    independent = [rng.gauss(0, 1) for _ in range(1200)]
    x, correlated = 0.0, []
    for _ in range(1200):
        x = 0.8 * x + rng.gauss(0, 1)
        correlated.append(x)
    assert auto_block_length(independent) == block_length(1200)
    assert 20 <= auto_block_length(correlated) <= 45  # the optimal length of AR(1) phi 0.8 is 32.9


def test_block_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    rng = random.Random(5)
    series = [rng.gammavariate(2.0, 0.01) for _ in range(300)]
    first = block_bootstrap_mean(series, seed=1)
    assert first == block_bootstrap_mean(series, seed=1) != block_bootstrap_mean(series, seed=2)
    assert first is not None and first.low < sum(series) / len(series) < first.high
    assert "seed 1" in first.method
    assert block_bootstrap_mean([1.0]) is None


def coverage_band(runs: int, coverage: float, tail: float = 1e-6) -> tuple[int, int]:
    """The counts a Binomial(runs, coverage) falls outside with probability at most `tail` on each side."""
    low = next(k for k in range(runs + 1) if binomial_cdf(k, runs, coverage) > tail)
    high = next(k for k in range(runs + 1) if binomial_cdf(k, runs, coverage) >= 1 - tail)
    return low, high


def test_order_statistic_coverage_of_300_runs() -> None:
    """300 intervals of the median of 100 exponential values: the count that cover ln 2 is Binomial(300,
    the ranks' exact coverage 0.9648), so it falls outside this band with probability under 2e-6."""
    ranks = order_statistic_ranks(100, 0.5)
    assert ranks is not None
    low, high = coverage_band(300, ranks.coverage)
    assert (low, high) == (271, 300)
    rng = random.Random(41)
    covered = 0
    for _ in range(300):
        interval = percentile_interval([rng.expovariate(1.0) for _ in range(100)], 0.5)
        assert interval is not None
        covered += interval.low <= math.log(2) <= interval.high
    assert low <= covered <= high


def test_wilson_coverage_of_300_runs() -> None:
    """Wilson's exact coverage at n = 200, p = 0.9 is the binomial mass of the k whose interval holds 0.9."""
    coverage = sum(
        binomial_cdf(k, 200, 0.9) - binomial_cdf(k - 1, 200, 0.9)
        for k in range(201)
        if wilson_interval(k, 200).low <= 0.9 <= wilson_interval(k, 200).high
    )
    assert 0.93 < coverage < 0.97
    low, high = coverage_band(300, coverage)
    rng = random.Random(41)
    covered = 0
    for _ in range(300):
        interval = wilson_interval(sum(rng.random() < 0.9 for _ in range(200)), 200)
        covered += interval.low <= 0.9 <= interval.high
    assert low <= covered <= high


def test_long_run_interval_widens_with_correlation() -> None:
    rng = random.Random(9)
    noise = [rng.gauss(0, 1) for _ in range(1200)]
    x, correlated = 0.0, []
    for e in noise:
        x = 0.8 * x + e
        correlated.append(x * 0.6)  # the same marginal spread as the noise, near enough
    plain, wide = long_run_mean_interval(noise), long_run_mean_interval(correlated)
    assert plain is not None and wide is not None
    assert 2.0 < (wide.high - wide.low) / (plain.high - plain.low)  # sqrt((1 + 0.8) / (1 - 0.8)) = 3 in theory
    assert long_run_mean_interval([1.0] * 50) is None and long_run_mean_interval([1.0, 2.0]) is None
