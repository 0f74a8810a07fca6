"""metrics/uncertainty.py and the intervals the load figures carry: each interval holds its figure, a
percentile has none below the count it needs, shares are Wilson's, rates scale to the figure."""

import random

import pytest

from loadproof.metrics.claims import number
from loadproof.metrics.intervals import batch_means_interval, min_count, student_t_quantile, wilson_interval
from loadproof.metrics.uncertainty import percentile_interval, ranked, rate_interval, share_interval
from loadproof.units import NS_PER_S


@pytest.mark.parametrize(("p", "df", "t"), [(0.975, 1, 12.7062), (0.975, 19, 2.0930), (0.95, 5, 2.0150)])
def test_student_t_quantiles_match_the_tables(p, df, t):
    assert student_t_quantile(p, df) == pytest.approx(t, abs=1e-3)
    assert student_t_quantile(1 - p, df) == pytest.approx(-t, abs=1e-3)


def test_batch_means_holds_the_mean_and_needs_three_batches():
    rng = random.Random(7)
    series = [rng.expovariate(1.0) for _ in range(400)]
    interval = batch_means_interval(series)
    assert interval is not None and interval.low < sum(series) / 400 < interval.high
    assert "10 batches of 40" in interval.method
    assert batch_means_interval([1.0] * 5) is None
    constant = batch_means_interval([2.0] * 40)
    assert constant is not None and constant.low == constant.high == 2.0


def test_a_percentile_interval_exists_only_from_the_count_it_needs():
    need = min_count(0.99)
    values = [float(i) for i in range(need)]
    assert percentile_interval(ranked(values[:-1]), 99.0) is None
    interval = percentile_interval(ranked(values), 99.0, 2.0)
    assert interval is not None and interval.high == 2.0 * (need - 1)


def test_a_share_interval_is_wilsons_in_percent():
    interval = share_interval(45, 50)
    wilson = wilson_interval(45, 50)
    assert interval is not None and (interval.low, interval.high) == pytest.approx(
        (100 * wilson.low, 100 * wilson.high)
    )
    assert share_interval(0, 0) is None


def test_a_rate_interval_brackets_the_rate_it_scales_to():
    rng = random.Random(3)
    start = 0
    ends = sorted(int(rng.uniform(0, 60) * NS_PER_S) for _ in range(600))
    value = 600 / 60.0
    interval = rate_interval(ends, [1.0] * 600, start, 60.0, value)
    assert interval is not None and interval.low < value < interval.high
    assert "per-second" in interval.method
    assert rate_interval(ends, [1.0] * 600, start, 0.0, value) is None


def test_a_claim_keeps_its_interval_in_claims_json():
    interval = share_interval(9, 10)
    claim = number("load.slo_attainment_pct", 90.0, "%", "x", 2, direction="higher", interval=interval)
    assert claim.as_dict()["interval"] == {
        "low": interval.low,
        "high": interval.high,
        "confidence": 0.95,
        "method": interval.method,
    }
    assert "interval" not in number("x", 1.0, "s", "x", direction="lower").as_dict()
