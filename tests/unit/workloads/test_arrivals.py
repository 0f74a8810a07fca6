"""Open-loop schedules: drawn up front from the seed, with the rate, shape and bounds asked for.

The statistical checks use a fixed seed and bounds that a wrong process would fail: 40,000 gaps put the
standard error of the mean at 0.5% (Poisson) and of the coefficient of variation below 1%, so 3% is
about three standard errors; a process off by a factor (a rate of 1/R, exponential gaps where gamma was
asked, a shape taken as a scale) misses by far more. They read the raw draw: at a constant rate the
schedule is then rescaled so its last offset is N/R (vLLM's normalization), which fixes the mean.
"""

from __future__ import annotations

import math
import statistics

import pytest

from loadproof.workloads.arrivals import (
    ALL_AT_ONCE,
    ArrivalSpec,
    Stage,
    intended_offsets,
    parse_rate,
    parse_stages,
    rate_text,
)

N = 40_000


def gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0, *offsets], offsets)]


def mean_and_cv(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    return mean, statistics.pstdev(values) / mean


@pytest.mark.parametrize(
    ("arrival", "burstiness", "cv"),
    [("poisson", 1.0, 1.0), ("gamma", 4.0, 0.5), ("gamma", 0.5, 1 / math.sqrt(0.5)), ("gamma", 1.0, 1.0)],
)
def test_mean_and_coefficient_of_variation_of_the_gaps(arrival, burstiness, cv):
    rate = 8.0
    spec = ArrivalSpec(arrival=arrival, rate_rps=rate, burstiness=burstiness, num_requests=N)
    raw = intended_offsets(spec, seed=731, rescale=False)  # the process itself, before vLLM's rescaling
    assert len(raw) == N
    mean, got_cv = mean_and_cv(gaps(raw))
    assert mean == pytest.approx(1 / rate, rel=0.03)
    assert got_cv == pytest.approx(cv, rel=0.03)
    offsets = intended_offsets(spec, seed=731)  # rescaled so that the last lands on N/R, as vLLM does
    assert offsets[-1] == pytest.approx(N / rate, rel=1e-12)
    assert offsets == pytest.approx([t * (N / rate) / raw[-1] for t in raw], rel=1e-12)
    assert mean_and_cv(gaps(offsets))[1] == pytest.approx(got_cv, rel=1e-9)  # the shape is untouched


def test_the_checks_would_catch_a_wrong_shape():
    """Bursty gamma (B = 0.25, CV 2) is far outside the Poisson bound: the test above can fail."""
    offsets = intended_offsets(
        ArrivalSpec(arrival="gamma", rate_rps=8.0, burstiness=0.25, num_requests=N), seed=731, rescale=False
    )
    _, cv = mean_and_cv(gaps(offsets))
    assert cv == pytest.approx(2.0, rel=0.05)
    assert abs(cv - 1.0) > 0.5


def test_the_same_seed_sends_at_the_same_offsets_and_another_does_not():
    spec = ArrivalSpec(arrival="poisson", rate_rps=3.0, num_requests=50)
    assert intended_offsets(spec, 5) == intended_offsets(spec, 5)
    assert intended_offsets(spec, 5) != intended_offsets(spec, 6)


def test_constant_sends_every_one_over_r_from_one_gap_in():
    offsets = intended_offsets(ArrivalSpec(arrival="constant", rate_rps=4.0, num_requests=5), seed=1)
    assert offsets == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25])


def test_a_duration_bounds_the_schedule_and_the_count_bounds_it_first():
    constant = intended_offsets(ArrivalSpec(arrival="constant", rate_rps=10.0, duration_s=3.0), seed=1)
    assert len(constant) == 30 and constant[-1] == pytest.approx(3.0)  # R x D requests, the last at N/R
    poisson = intended_offsets(ArrivalSpec(arrival="poisson", rate_rps=200.0, duration_s=50.0), seed=2)
    assert len(poisson) == 10_000 and poisson[-1] == pytest.approx(50.0)
    raw = intended_offsets(ArrivalSpec(arrival="poisson", rate_rps=200.0, duration_s=50.0), seed=2, rescale=False)
    assert max(raw) < 50.0 and len(raw) == pytest.approx(10_000, rel=0.03)  # a Poisson count: sd 1%
    assert len(intended_offsets(ArrivalSpec(rate_rps=10.0, duration_s=30.0, num_requests=7), seed=1)) == 7
    assert intended_offsets(ArrivalSpec(rate_rps=1.0, duration_s=0.5), seed=1) == []


def test_all_at_once():
    spec = ArrivalSpec(rate_rps=ALL_AT_ONCE, num_requests=6)
    assert spec.all_at_once and spec.constant_rps is None and not spec.rescaled
    assert intended_offsets(spec, seed=1) == [0.0] * 6
    with pytest.raises(ValueError, match="a number of requests"):
        ArrivalSpec(rate_rps=ALL_AT_ONCE)


@pytest.mark.parametrize("rate", [math.inf, -1.0, 0.0, math.nan, "2", True])
def test_all_at_once_is_one_typed_value_never_an_infinite_float(rate):
    with pytest.raises(ValueError, match="finite number > 0"):
        ArrivalSpec(rate_rps=rate, num_requests=3)


def test_stages_send_at_each_stages_rate_and_end_with_the_last():
    spec = ArrivalSpec(arrival="constant", stages=(Stage(2.0, 10.0), Stage(5.0, 4.0)))
    offsets = intended_offsets(spec, seed=1)
    first = [t for t in offsets if t < 10.0]
    second = [t for t in offsets if t >= 10.0]
    assert len(first) == 19 and len(second) == 20  # 2/s over 10 s (the first after one gap), then 5/s over 4 s
    assert max(offsets) < 14.0
    assert gaps(second)[1:] == pytest.approx([0.2] * 19)
    poisson = intended_offsets(ArrivalSpec(stages=(Stage(50.0, 100.0), Stage(200.0, 100.0))), seed=3)
    low = sum(t < 100.0 for t in poisson)
    assert low == pytest.approx(5000, rel=0.05) and len(poisson) - low == pytest.approx(20_000, rel=0.03)


def test_ramp_up_rises_linearly_then_holds_the_rate():
    """lambda(t) = R t / S over the ramp, so Lambda(t) = R t^2 / (2 S): a quarter of the ramp's arrivals
    come in its first half, and the rate after it is R."""
    rate, ramp = 100.0, 40.0
    spec = ArrivalSpec(arrival="poisson", rate_rps=rate, ramp_up_s=ramp, duration_s=ramp + 60.0)
    assert spec.rate_at(10.0) == pytest.approx(25.0) and spec.rate_at(50.0) == pytest.approx(100.0)
    assert spec.expected_arrivals(ramp) == pytest.approx(rate * ramp / 2)
    offsets = intended_offsets(spec, seed=4)
    in_ramp = [t for t in offsets if t < ramp]
    first_half = sum(t < ramp / 2 for t in in_ramp)
    assert len(in_ramp) == pytest.approx(2000, rel=0.07)
    assert first_half / len(in_ramp) == pytest.approx(0.25, abs=0.03)
    after = [t for t in offsets if t >= ramp]
    assert len(after) / 60.0 == pytest.approx(rate, rel=0.05)
    constant = intended_offsets(ArrivalSpec(arrival="constant", rate_rps=2.0, ramp_up_s=4.0, num_requests=3), seed=1)
    assert constant == pytest.approx([2.0, math.sqrt(8.0), math.sqrt(12.0)])  # Lambda(t) = t^2 / 4 = 1, 2, 3


@pytest.mark.parametrize(
    ("text", "message"),
    [("0", "must be > 0"), ("-2", "must be > 0"), ("fast", "takes a number"), ("nan", "must be > 0")],
)
def test_bad_rates(text, message):
    with pytest.raises(ValueError, match=message):
        parse_rate(text)
    assert parse_rate("2.5") == 2.5 and parse_rate(4) == 4.0


@pytest.mark.parametrize("given", ["inf", " Infinity ", math.inf, ALL_AT_ONCE])
def test_every_spelling_of_all_at_once_parses_to_the_one_typed_value(given):
    rate = parse_rate(given)
    assert rate is ALL_AT_ONCE and str(rate) == "inf" and rate_text(rate) == "inf"
    assert rate_text(parse_rate("2.50")) == "2.5"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2-30", "RATE:SECONDS"),
        ("2:x", "two numbers"),
        ("0:5", "rate must be"),
        ("2:0", "seconds must be"),
        ("inf:5", "rate must be"),
        ("", "takes"),
    ],
)
def test_bad_stages(text, message):
    with pytest.raises(ValueError, match=message):
        parse_stages(text)
    assert parse_stages("2:30, 4:15") == (Stage(2.0, 30.0), Stage(4.0, 15.0))


def test_an_unbounded_or_huge_schedule_is_refused_before_drawing():
    with pytest.raises(ValueError, match="bound"):
        ArrivalSpec(rate_rps=2.0)
    with pytest.raises(ValueError, match="more than"):
        intended_offsets(ArrivalSpec(rate_rps=1e6, duration_s=3600.0), seed=1)
