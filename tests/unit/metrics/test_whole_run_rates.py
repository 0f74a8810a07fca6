"""A whole run's rates where a rescaled schedule fixed the count (metrics/conditioning.py `RunCount`,
uncertainty.rate_interval): the drain's variance against its law worked out by hand, the interval's arithmetic,
which runs get it, and its coverage of the figure's expectation on a law where only the drain and the tokens vary."""

from __future__ import annotations

import itertools
import math
import random
from statistics import NormalDist

import msgspec
import pytest

from loadproof.metrics.conditioning import TAIL_MIN, DrainLaw, RunCount, drain_law
from loadproof.metrics.intervals import batch_spread, student_t_quantile
from loadproof.metrics.latency import itl_ends_ns
from loadproof.metrics.time_batches import mean_in_time
from loadproof.metrics.uncertainty import per_second, rate_interval
from tests.unit.metrics.test_conditioning import CONDITIONED, bursty_records, claims_of, rec
from tests.unit.metrics.test_interval_coverage import band
from tests.unit.metrics.test_load import T0, S

ENDS = "conditioned on each second's ends, with the drain's spread"
WHOLE_RUN = ("load.request_throughput_rps", "load.output_tokens_per_s", "load.goodput_rps")


def moments(values: list[float], weights: list[float]) -> float:
    mean = sum(v * w for v, w in zip(values, weights, strict=True))
    return sum((v - mean) ** 2 * w for v, w in zip(values, weights, strict=True))


def test_the_drain_of_one_request_in_reach_is_its_latency_law():
    # sends 1 s apart, latencies at most 0.4 s: only the last send can end after it, so D is one draw of the law
    # of the last tenth's latencies (at least TAIL_MIN: here all 100, 0.1, 0.2, 0.3, 0.4, ... by i mod 4)
    latency = [0.1 * (1 + i % 4) for i in range(100)]
    records = [rec(i, float(i), 0.05, latency[i]) for i in range(100)]
    law = [latency[i] for i in range(100 - TAIL_MIN, 100)]
    got = drain_law(records)
    assert got.var_s2 == pytest.approx(moments(law, [1 / TAIL_MIN] * TAIL_MIN), rel=0.02)
    assert got.mean_s == pytest.approx(sum(law) / TAIL_MIN, rel=0.01)


def test_the_drain_of_two_requests_in_reach_is_the_law_of_their_later_end():
    # the last two sends 0.2 s apart, the others 10 s before; fewer than TAIL_MIN requests, so the law is all
    # their latencies; D = max(L1 - 0.2, L2), L1 and L2 drawn independently from it: by enumerating the pairs
    sends = [10.0 * i for i in range(18)] + [180.0, 180.2]
    latency = [0.5] * 10 + [0.1 * (1 + k) for k in range(10)]
    records = [rec(i, s, 0.05, latency[i]) for i, s in enumerate(sends)]
    ends = [max(a - 0.2, b) for a, b in itertools.product(latency, latency)]
    got = drain_law(records)
    assert got.var_s2 == pytest.approx(moments(ends, [1 / 400] * 400), rel=0.03)
    assert got.mean_s == pytest.approx(sum(ends) / 400, rel=0.01)
    assert drain_law(records[:1]) == DrainLaw(0.0, 0.0)


def test_a_count_the_ends_explain_whole_keeps_only_the_drain():
    records = bursty_records()
    t0, end = T0, max(r.end_ns for r in records)
    duration = (end - t0) / S
    run = RunCount([r.end_ns for r in records], drain_law(records), t0, duration)
    value = len(records) / duration
    got = rate_interval([r.end_ns for r in records], [1.0] * len(records), t0, duration, value, None, run)
    assert got is not None and "normal" in got.method and ENDS in got.method
    half = NormalDist().inv_cdf(0.975) * math.sqrt(run.drain.var_s2) / duration * value
    assert (got.high - got.low) / 2 == pytest.approx(half)
    assert got.low < value < got.high


def test_tokens_keep_the_batches_spread_beside_the_drains_on_satterthwaites_degrees_of_freedom():
    records = bursty_records()
    duration = (max(r.end_ns for r in records) - T0) / S
    ends = [r.end_ns for r in records]
    tokens = [float(r.output_tokens or 0) for r in records]
    run = RunCount(ends, drain_law(records), T0, duration)
    value = sum(tokens) / duration
    got = rate_interval(ends, tokens, T0, duration, value, None, run)
    assert got is not None and "Student t on" in got.method
    series = per_second(ends, tokens, T0, duration)
    mean = sum(series) / len(series)
    var, df = batch_spread(series, 10, per_second(ends, [1.0] * len(ends), T0, duration))
    a, b = var / 10 / mean**2, run.drain.var_s2 / duration**2
    assert a > 0 and b > 0
    dof = df * (a + b) ** 2 / a**2
    assert f"Student t on {dof:.1f} df" in got.method


def test_only_a_run_that_records_it_gets_it():
    records = bursty_records()
    now = claims_of(records, rescaled=True, arrivals_known=True, ends_known=True)
    for name in WHOLE_RUN:
        interval = now[name].interval
        assert interval is not None and ENDS in interval.method, name
    before = claims_of(records, rescaled=True, arrivals_known=True)  # published before: on the sends
    poisson = claims_of(records, arrivals_known=True, ends_known=True)  # nothing fixed the count
    for name in WHOLE_RUN:
        for other in (before, poisson):
            interval = other[name].interval
            assert interval is not None and ENDS not in interval.method, name
            assert other[name].value == now[name].value
    # the other figures are as before
    for name in ("load.ttft_s.p50", "load.e2el_s.mean", "load.steady.output_tokens_per_s"):
        assert now[name].interval == before[name].interval


def one_run(rng: random.Random, n: int = 400, rate: float = 4.0) -> tuple[float, float, list, float]:
    """A rescaled schedule of n sends, each request's latency lognormal(0, 0.5) s and its tokens 1-40, whatever
    the load: the requests/s figure moves only with the drain, the tokens/s one also with the tokens."""
    raw = list(itertools.accumulate(rng.expovariate(rate) for _ in range(n)))
    records = [
        rec(i, s * (n / rate) / raw[-1], 0.01, rng.lognormvariate(0.0, 0.5), rng.randint(1, 40))
        for i, s in enumerate(raw)
    ]
    duration = (max(r.end_ns for r in records) - T0) / S
    return n / duration, sum(r.output_tokens or 0 for r in records) / duration, records, duration


def test_the_whole_runs_rates_cover_their_expectation_as_claimed():
    """On a law where only the drain and the tokens vary, 300 runs' 95% intervals hold the figures' expectation
    (over 3,000 other runs) within the band 93-97% allows (`band`)."""
    rng = random.Random(41)
    truth = [one_run(rng)[:2] for _ in range(3000)]
    expected = [sum(t[j] for t in truth) / len(truth) for j in (0, 1)]
    covered = [0, 0]
    for _ in range(300):
        rps, tps, records, duration = one_run(rng)
        ends = [r.end_ns for r in records]
        run = RunCount(ends, drain_law(records), T0, duration)
        tokens = [float(r.output_tokens or 0) for r in records]
        for j, (weights, value) in enumerate((([1.0] * len(records), rps), (tokens, tps))):
            got = rate_interval(ends, weights, T0, duration, value, None, run)
            assert got is not None
            covered[j] += got.low <= expected[j] <= got.high
    low, high = band(300)
    assert low <= covered[0] <= high and low <= covered[1] <= high, covered


IN_TIME = "conditioned on each second's ends"


def test_itl_in_time_is_the_linearized_per_second_mean_by_hand():
    # 40 s; each second one request ends and its gaps end in it: second t holds gaps of 10 + (t mod 3) ms
    records = []
    for t in range(40):
        gap = round((0.010 + 0.001 * (t % 3)) * S)
        chunks = [T0 + t * S + S // 2 + i * gap for i in range(5)]  # all in second t
        r = rec(t, t + 0.1, 0.4, 0.45, 5)
        records.append(
            msgspec.structs.replace(
                r, first_token_ns=chunks[0], chunk_ns=chunks, last_token_ns=chunks[-1], end_ns=chunks[-1]
            )
        )
    run = RunCount([r.end_ns for r in records], DrainLaw(0.0, 0.0), T0, (records[-1].end_ns - T0) / S)
    values = [float(g) for r in records for g in r.itl_ns()]
    times = [t for r in records for t in itl_ends_ns(r)]
    assert len(values) == len(times) == 160
    got = mean_in_time(values, times, run, 0.95)
    assert got is not None and IN_TIME in got.method and "10 batches of 4 s" in got.method
    mean = sum(values) / 160
    # per second: 4 gaps, z_t = (sum_t - mean x 4) / 4; batches of 4 s; the ends (one a second) explain nothing
    z = [(sum(values[4 * t : 4 * t + 4]) - mean * 4) / 4 for t in range(40)]
    var, df = batch_spread(z, 10, [1.0] * 40)
    half = student_t_quantile(0.975, df) * math.sqrt(var / 10)
    assert got.low == pytest.approx(mean - half) and got.high == pytest.approx(mean + half)


def test_only_a_run_that_records_its_ends_batches_itl_in_time():
    records = bursty_records()
    now = claims_of(records, rescaled=True, arrivals_known=True, ends_known=True)
    before = claims_of(records, rescaled=True, arrivals_known=True)
    for stat in ("mean", "p50"):  # (a p99 of these 1,200 gaps, correlated, has too few for one: none)
        name = f"load.itl_s.{stat}"
        a, b = now[name].interval, before[name].interval
        assert a is not None and IN_TIME in a.method, name
        assert b is not None and IN_TIME not in b.method, name
        assert now[name].value == before[name].value
        assert a.low <= now[name].value <= a.high
    assert now["load.itl_s.max"].interval is None


def test_a_run_too_short_for_four_batches_of_seconds_keeps_itls_request_batches():
    records = bursty_records(24)  # 6 s of sends: under 8 s, too short for 4 batches of 2 s
    now = claims_of(records, rescaled=True, arrivals_known=True, ends_known=True)
    interval = now["load.itl_s.mean"].interval
    assert interval is not None and CONDITIONED in interval.method and IN_TIME not in interval.method
