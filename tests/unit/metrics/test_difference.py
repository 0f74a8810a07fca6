"""The difference of one figure between two independent runs (metrics/difference.py, MOVER): its bounds worked
out by hand, its reduction to the textbook interval for symmetric normal intervals, and its coverage."""

import math
import random
from statistics import NormalDist

import pytest

from loadproof.metrics.difference import MOVER, mover_difference
from loadproof.metrics.intervals import Interval

Z = NormalDist().inv_cdf(0.975)


def iv(low, high, confidence=0.95):
    return Interval(low, high, confidence, "test")


def test_bounds_from_each_side_of_each_interval():
    # d = 12 - 10 = 2; low: the candidate's lower half (1) and the baseline's upper half (1);
    # high: the candidate's upper half (1.5) and the baseline's lower half (1)
    d = mover_difference(10.0, iv(9.0, 11.0), 12.0, iv(11.0, 13.5))
    assert d is not None and d.method == MOVER and d.confidence == 0.95
    assert d.low == pytest.approx(2 - math.sqrt(1 + 1)) and d.high == pytest.approx(2 + math.sqrt(1.5**2 + 1))


def test_a_skewed_interval_keeps_its_skew():
    # the baseline's interval reaches far above it (a tail percentile): the difference reaches far below 0
    d = mover_difference(1.0, iv(0.9, 2.0), 1.0, iv(0.9, 1.1))
    assert d is not None and d.low == pytest.approx(-math.hypot(0.1, 1.0)) and d.high == pytest.approx(0.1 * 2**0.5)


def test_symmetric_normal_intervals_give_the_textbook_interval():
    # mean +- z se on each side: d +- z sqrt(se_a^2 + se_b^2)
    d = mover_difference(5.0, iv(5 - Z * 1.0, 5 + Z * 1.0), 8.0, iv(8 - Z * 2.0, 8 + Z * 2.0))
    assert d is not None
    half = Z * math.sqrt(1.0 + 4.0)
    assert d.low == pytest.approx(3.0 - half) and d.high == pytest.approx(3.0 + half)


def test_intervals_at_different_confidences_are_not_combined():
    assert mover_difference(1.0, iv(0.9, 1.1, 0.95), 1.2, iv(1.1, 1.3, 0.90)) is None


def test_covers_the_true_difference_about_as_often_as_it_claims():
    """Two independent normal means with their own 95% intervals, 4,000 pairs (seeded): the difference's
    interval holds the true difference in 93-97% of them."""
    rng = random.Random(41)
    covered, trials = 0, 4000
    for _ in range(trials):
        se_a, se_b = rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0)
        a, b = rng.gauss(10.0, se_a), rng.gauss(13.0, se_b)
        d = mover_difference(a, iv(a - Z * se_a, a + Z * se_a), b, iv(b - Z * se_b, b + Z * se_b))
        assert d is not None
        covered += d.low <= 3.0 <= d.high
    assert 0.93 <= covered / trials <= 0.97
