"""Between-run statistics: each arm's Student t interval, Welch's interval of the difference, the A B B A order.
Expected values computed by hand from tabulated t quantiles, not by the module's own formulas."""

from __future__ import annotations

import math

import pytest

from loadproof.metrics.between_runs import WELCH, abba_order, arm_difference, spread, welch_interval

T975 = {2: 4.302653, 4: 2.776445}  # Student t 0.975 quantiles, from tables


def test_the_spread_of_three_runs_is_their_mean_plus_minus_t_s_over_root_n():
    s = spread([1.0, 2.0, 3.0])
    assert s.mean == 2.0 and s.sd == pytest.approx(1.0)
    assert s.interval is not None
    half = T975[2] / math.sqrt(3)
    assert (s.interval.low, s.interval.high) == pytest.approx((2.0 - half, 2.0 + half), rel=1e-5)
    assert s.cv == pytest.approx(0.5)


def test_one_run_has_no_interval_and_no_spread():
    s = spread([5.0])
    assert (s.mean, s.sd, s.interval, s.cv) == (5.0, None, None, None)
    with pytest.raises(ValueError, match="at least one"):
        spread([])


def test_welch_with_equal_variances_and_counts_has_2n_minus_2_degrees_of_freedom():
    a, b = [98.0, 100.0, 102.0], [118.0, 120.0, 122.0]  # sd 2 each: se = sqrt(4/3 + 4/3), nu = 4
    diff = arm_difference(a, b)
    assert diff.difference == pytest.approx(20.0)
    assert diff.interval is not None and diff.interval.method == WELCH
    half = T975[4] * math.sqrt(8 / 3)
    assert (diff.interval.low, diff.interval.high) == pytest.approx((20.0 - half, 20.0 + half), rel=1e-5)
    assert diff.distinguishable is True
    assert diff.change == pytest.approx(0.2)


def test_overlapping_arms_are_not_distinguishable():
    diff = arm_difference([10.0, 12.0, 11.0], [11.5, 10.5, 12.0])
    assert diff.interval is not None and diff.interval.low < 0 < diff.interval.high
    assert diff.distinguishable is False


def test_constant_arms_differ_exactly_and_one_run_a_side_says_nothing():
    exact = welch_interval([3.0, 3.0], [5.0, 5.0])
    assert exact is not None and (exact.low, exact.high) == (2.0, 2.0)
    assert arm_difference([3.0, 3.0], [3.0, 3.0]).distinguishable is False
    alone = arm_difference([3.0], [4.0, 5.0])
    assert alone.interval is None and alone.distinguishable is None


def test_abba_balances_each_arm_over_the_positions_of_a_pair():
    assert abba_order(3) == ["a", "b", "b", "a", "a", "b"]
    assert abba_order(2, ("x", "y")) == ["x", "y", "y", "x"]
    order = abba_order(4)
    assert order.count("a") == order.count("b") == 4
    # a linear drift falls equally on both arms with an even count of pairs: the mean positions agree
    positions = {arm: [i for i, o in enumerate(order) if o == arm] for arm in "ab"}
    assert sum(positions["a"]) == sum(positions["b"])
