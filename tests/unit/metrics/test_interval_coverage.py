"""The suite's small version of benchmarks/interval_coverage.py (docs/benchmarks.md, section 12): the intervals
the claims carry, on 200 seeded samples of a correlated law whose truth is known, cover it as often as they
claim; the intervals for independent values, on the same samples, do not.

The law: a stationary AR(1) latent series z_t (phi 0.8, every z_t standard normal), latencies exp(z_t / 2)
(lognormal, true q-quantile exp(z(q) / 2), true mean exp(1 / 8)), outcomes z_t <= z(0.9) (true share 0.9).
The band a count must fall in is computed from the binomial, not guessed: a method whose coverage lies
within 93-97% puts its count of runs covering the truth at or above the 0.1% quantile of Binomial(runs,
0.93) and at or below the 99.9% quantile of Binomial(runs, 0.97), each with probability at least 99.9%.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from statistics import NormalDist

import pytest

from loadproof.metrics.dependence import correlated_percentile_interval, correlated_share_interval
from loadproof.metrics.intervals import Interval, batch_means_interval, binomial_cdf, wilson_interval
from loadproof.metrics.uncertainty import percentile_interval, ranked, share_interval, stat_interval

RUNS, N, PHI, SEED = 200, 2000, 0.8, 41
Z = NormalDist()
CUT = Z.inv_cdf(0.9)


def band(runs: int, low: float = 0.93, high: float = 0.97, tail: float = 0.001) -> tuple[int, int]:
    """The counts of `runs` a method covering low..high lands within, each side missed with probability < tail."""
    lo = next(k for k in range(runs + 1) if binomial_cdf(k, runs, low) > tail)
    hi = next(k for k in range(runs + 1) if binomial_cdf(k, runs, high) >= 1 - tail)
    return lo, hi


def latent(rng: random.Random) -> list[float]:
    z, out, scale = rng.gauss(0.0, 1.0), [], math.sqrt(1.0 - PHI * PHI)
    for _ in range(N):
        out.append(z)
        z = PHI * z + scale * rng.gauss(0.0, 1.0)
    return out


@pytest.fixture(scope="module")
def samples() -> list[list[float]]:
    rng = random.Random(SEED)
    return [latent(rng) for _ in range(RUNS)]


def coverage(
    samples: list[list[float]], interval: Callable[[list[float]], Interval | None], truth: float
) -> tuple[int, int]:
    """(runs with an interval, runs whose interval holds `truth`)."""
    got = [interval(z) for z in samples]
    held = [iv for iv in got if iv is not None]
    return len(held), sum(iv.low <= truth <= iv.high for iv in held)


def latencies(z: list[float]) -> list[float]:
    return [math.exp(v / 2.0) for v in z]


def test_the_band_is_the_binomials() -> None:
    # 0.93 x 200 = 186 less about 3.1 sd; at 97% all 200 happen with probability 0.2%, so 200 runs cannot
    # tell too wide an interval (the benchmark's 500 a row and its printed share do); too narrow they can
    assert band(200) == (174, 200)
    assert band(2000) == (1824, 1962)  # 2,000 runs would tell both sides


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_a_percentile_on_the_effective_count_covers_as_claimed(samples, q) -> None:
    truth = math.exp(Z.inv_cdf(q) / 2.0)

    def claimed(z: list[float]) -> Interval | None:  # as latency_claims computes it (the values in time order)
        return stat_interval(latencies(z), f"p{round(q * 100)}")

    runs, covered = coverage(samples, claimed, truth)
    assert runs >= RUNS * 0.8  # a p99 of 2,000 values this correlated is sometimes too few for one: none
    low, high = band(runs)
    assert low <= covered <= high, (covered, runs)


@pytest.mark.parametrize("q", [0.5, 0.9])
def test_independent_values_intervals_miss_on_the_same_samples(samples, q) -> None:
    """The order statistics for independent values, on the same correlated samples: far below the band, so
    the test above could fail."""
    truth = math.exp(Z.inv_cdf(q) / 2.0)
    runs, covered = coverage(samples, lambda z: percentile_interval(ranked(latencies(z)), 100 * q), truth)
    assert covered < band(runs)[0] - 20


def test_a_share_on_the_effective_count_covers_as_claimed(samples) -> None:
    def claimed(z: list[float]) -> Interval | None:  # as slo_claims computes attainment, as a fraction
        outcomes = [v <= CUT for v in z]
        return share_interval(sum(outcomes), len(outcomes), scale=1.0, outcomes=outcomes)

    runs, covered = coverage(samples, claimed, 0.9)
    low, high = band(runs)
    assert low <= covered <= high, covered
    _, plain = coverage(samples, lambda z: wilson_interval(sum(v <= CUT for v in z), N), 0.9)
    assert plain < low - 20


def test_a_mean_by_batch_means_covers_as_claimed(samples) -> None:
    runs, covered = coverage(samples, lambda z: batch_means_interval(latencies(z)), math.exp(1 / 8))
    low, high = band(runs)
    assert low <= covered <= high, covered


def test_the_effective_count_leaves_short_and_flat_series_as_independent() -> None:
    values = [float(i % 7) for i in range(99)]  # under MIN_VALUES: the plain interval, its method unchanged
    plain = percentile_interval(ranked(values), 50.0)
    assert correlated_percentile_interval(values, sorted(values), 0.5) == plain
    flat = [True] * 500  # every outcome alike: Wilson's own interval
    assert correlated_share_interval(flat) == wilson_interval(500, 500)
    burst = [i // 100 % 2 == 0 for i in range(1000)]  # misses in bursts of 100: worth far fewer than 1,000
    wide, narrow = correlated_share_interval(burst), wilson_interval(500, 1000)
    assert wide is not None and "effective count" in wide.method
    assert wide.high - wide.low > 3 * (narrow.high - narrow.low)
