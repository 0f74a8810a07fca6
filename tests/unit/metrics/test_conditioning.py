"""Intervals conditioned on each batch's arrivals where a rescaled schedule fixed the count
(metrics/conditioning.py, intervals.batch_spread), and the steady window ended at the last send
(metrics/steady_state.py): the arithmetic by hand, the coverage on a law whose mean is known, and which runs get
them."""

from __future__ import annotations

import math
import random
from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim
from loadproof.metrics.conditioning import arrival_gaps, fixed_count
from loadproof.metrics.dependence import correlated_share_interval
from loadproof.metrics.intervals import batch_means_interval, batch_spread, student_t_quantile
from loadproof.metrics.steady_state import SteadyWindow, steady_window
from loadproof.records import RequestRecord
from tests import rundir_values as rv
from tests.unit.metrics.test_interval_coverage import band
from tests.unit.metrics.test_load import T0, S, plan

CONDITIONED = "conditioned on each batch's arrivals"


def test_without_a_covariate_the_spread_is_the_batch_means_variance():
    series = [float((7 * i) % 11) for i in range(200)]
    means = [sum(series[20 * b : 20 * (b + 1)]) / 20 for b in range(10)]
    middle = sum(means) / 10
    var, df = batch_spread(series, 10)
    assert df == 9 and var == pytest.approx(sum((m - middle) ** 2 for m in means) / 9)
    assert batch_means_interval(series).method == "batch means, 10 batches of 20, Student t"


def test_a_covariate_that_explains_the_batches_leaves_only_the_rest():
    x = [float(b % 3) for b in range(10) for _ in range(20)]  # batch means 0, 1, 2, 0, ...
    exact = [5.0 + 2.0 * v for v in x]
    var, df = batch_spread(exact, 10, x)
    assert df == 8 and var == pytest.approx(0.0, abs=1e-20)
    interval = batch_means_interval(exact, covariate=x)
    assert interval is not None and interval.low == pytest.approx(interval.high) == pytest.approx(sum(exact) / 200)
    assert CONDITIONED in interval.method
    # a residual of +1 / -1 by batch beside the covariate: its variance on k - 2 = 8 degrees of freedom
    wobble = [v + (1.0 if (j // 20) % 2 else -1.0) for j, v in enumerate(exact)]
    var, df = batch_spread(wobble, 10, x)
    means_x = [float(b % 3) for b in range(10)]
    signs = [1.0 if b % 2 else -1.0 for b in range(10)]
    cx = sum(means_x) / 10
    slope = sum((a - cx) * s for a, s in zip(means_x, signs, strict=True)) / sum((a - cx) ** 2 for a in means_x)
    residual = [s - slope * (a - cx) for a, s in zip(means_x, signs, strict=True)]
    assert df == 8 and var == pytest.approx(sum(r * r for r in residual) / 8)
    got = batch_means_interval(wobble, covariate=x)
    assert got is not None
    assert (got.high - got.low) / 2 == pytest.approx(student_t_quantile(0.975, 8) * math.sqrt(var / 10))
    with pytest.raises(ValueError):
        batch_spread(exact, 10, x[:-1])


def fixed_total_draw(rng: random.Random, n: int = 1000) -> tuple[list[float], list[float]]:
    """A series driven by its covariate, whose total the design fixes: x an AR(1) of slow bursts, centred so
    it sums to 0 (a rescaled schedule's arrivals), y = 10 + 3 x + independent noise, so mean(y) = 10 + the
    noise's mean: the bursts never reach it."""
    z, x = 0.0, []
    for _ in range(n):
        z = 0.95 * z + rng.gauss(0.0, 1.0)
        x.append(z)
    centre = sum(x) / n
    x = [v - centre for v in x]
    return [10.0 + 3.0 * v + rng.gauss(0.0, 1.0) for v in x], x


def test_conditioned_on_a_fixed_total_the_interval_holds_the_mean_as_often_as_it_claims():
    """200 draws: the raw batch means count the bursts the fixed total cancels and hold 10 (nearly) every
    time; the conditioned interval holds it as often as it claims (`band`: a coverage within 93-97% lands
    there with probability at least 99.9%)."""
    rng = random.Random(41)
    raw = conditioned = 0
    for _ in range(200):
        y, x = fixed_total_draw(rng)
        plain, given = batch_means_interval(y), batch_means_interval(y, covariate=x)
        assert plain is not None and given is not None
        raw += plain.low <= 10.0 <= plain.high
        conditioned += given.low <= 10.0 <= given.high
    assert raw >= 198
    low, high = band(200)
    assert low <= conditioned <= high
    assert conditioned < raw  # narrower than the raw batch means'


def test_a_share_on_its_effective_count_given_the_arrivals():
    rng = random.Random(7)
    y, x = fixed_total_draw(rng)
    outcomes = [v <= 10.0 for v in y]
    plain, given = correlated_share_interval(outcomes), correlated_share_interval(outcomes, covariate=x)
    assert plain is not None and given is not None
    assert CONDITIONED in given.method and CONDITIONED not in plain.method
    assert given.high - given.low < plain.high - plain.low  # the bursts explain most of the batches' spread


def rec(i: int, send_s: float, ttft_s: float, e2e_s: float, tokens: int = 10) -> RequestRecord:
    send = T0 + round(send_s * S)
    first, end = send + round(ttft_s * S), send + round(e2e_s * S)
    return RequestRecord(
        request_id=f"load-{i}",
        endpoint="completions",
        scenario="load",
        family="synthetic",
        batch=i,
        ok=True,
        send_ns=send,
        intended_send_ns=send,
        dispatch_ns=send,
        first_token_ns=first,
        last_token_ns=end,
        end_ns=end,
        prompt_tokens=64,
        output_tokens=tokens,
        chunk_ns=[first, (first + end) // 2, end],
        chunk_tokens=[1, tokens // 2, tokens - 1 - tokens // 2],
        planned_input_tokens=64,
        planned_output_tokens=tokens,
    )


def bursty_records(n: int = 600, rate: float = 4.0) -> list[RequestRecord]:
    """n Poisson sends rescaled so the last is at n / rate, each one's latency growing with the sends of the
    two seconds before it (a loaded engine's queue), in the order they ended."""
    rng = random.Random(3)
    raw = []
    t = 0.0
    for _ in range(n):
        t += rng.expovariate(rate)
        raw.append(t)
    sends = [s * (n / rate) / raw[-1] for s in raw]
    out = []
    for i, s in enumerate(sends):
        recent = sum(1 for u in sends[max(0, i - 40) : i] if s - u < 2.0)
        ttft = 0.05 + 0.01 * recent + rng.random() * 0.02
        out.append(rec(i, s, ttft, ttft + 1.0 + 0.05 * recent, 8 + i % 5))
    return sorted(out, key=lambda r: r.end_ns)


def claims_of(records: list[RequestRecord], **changes: object) -> dict[str, Claim]:
    p = plan(
        planned_requests=len(records),
        rate_rps=4.0,
        schedule_span_s=150.0,
        slo={"ttft": 0.1},
        steady_window=True,
        **changes,
    )
    manifest = {"run_id": "load-x", "scenario": "load", "plan": msgspec.to_builtins(p), "plan_version": 1}
    run = rv.run_of(Path("load-x"), manifest, records, events=[{"kind": "schedule_start", "t_ns": T0}])
    return {c.name: c for c in compute_claims(run)}


INTERVALS = (
    "load.ttft_s.p50",
    "load.e2el_s.mean",
    "load.itl_s.mean",
    "load.slo_attainment_pct",
    "load.output_tokens_per_s",
    "load.request_throughput_rps",
    "load.steady.output_tokens_per_s",
)


def methods(claims: dict[str, Claim]) -> dict[str, str]:
    return {name: claims[name].interval.method for name in INTERVALS if claims[name].interval is not None}


def test_a_rescaled_run_that_knows_its_arrivals_conditions_its_intervals():
    records = bursty_records()
    got = claims_of(records, rescaled=True, arrivals_known=True)
    conditioned = methods(got)
    assert set(conditioned) == set(INTERVALS)
    assert all(CONDITIONED in m for m in conditioned.values()), conditioned
    before = claims_of(records, rescaled=True)  # a bundle published before: the intervals it was published with
    assert not [m for m in methods(before).values() if CONDITIONED in m]
    poisson = claims_of(records, arrivals_known=True)  # not rescaled: nothing fixed the count
    assert not [m for m in methods(poisson).values() if CONDITIONED in m]
    for name in INTERVALS:  # the same figures (the steady window's is over another window, below)
        assert name == "load.steady.output_tokens_per_s" or got[name].value == before[name].value
        a, b = got[name].interval, before[name].interval
        assert a is not None and b is not None and a.low <= got[name].value <= a.high
    ttft_given, ttft_raw = got["load.ttft_s.p50"].interval, before["load.ttft_s.p50"].interval
    assert ttft_given is not None and ttft_raw is not None
    assert ttft_given.high - ttft_given.low < ttft_raw.high - ttft_raw.low


def test_a_run_that_knows_its_arrivals_ends_the_steady_window_at_its_last_send():
    records = bursty_records()
    last = max(r.send_ns for r in records)
    got = claims_of(records, rescaled=True, arrivals_known=True)
    assert got["load.steady.end_s"].value == (last - T0) // S == 150  # the last send is at 150 s exactly
    assert "the last send" in got["load.steady.method"].formula
    before = claims_of(records, rescaled=True)
    assert before["load.steady.end_s"].value != got["load.steady.end_s"].value


def test_which_runs_fixed_their_count():
    records = bursty_records(100)
    fixed = plan(planned_requests=100, rescaled=True, arrivals_known=True)
    assert fixed_count(fixed, records)
    assert not fixed_count(msgspec.structs.replace(fixed, arrivals_known=False), records)  # published before
    assert not fixed_count(msgspec.structs.replace(fixed, rescaled=False), records)  # a Poisson count
    assert not fixed_count(fixed, records[:-1])  # interrupted: fewer sent than planned
    assert not fixed_count(msgspec.structs.replace(fixed, until_precision={"ttft_p50": 5.0}), records)


def test_arrival_gaps_are_in_the_records_order_and_sum_to_the_span():
    records = bursty_records(50)
    gaps = arrival_gaps(records, T0)
    by_send = sorted(records, key=lambda r: r.send_ns)
    assert sum(gaps) == pytest.approx((by_send[-1].send_ns - T0) / S)
    assert all(g >= 0 for g in gaps)
    first = records.index(by_send[0])
    assert gaps[first] == pytest.approx((by_send[0].send_ns - T0) / S)


def test_a_known_drain_ends_the_window_and_mser_finds_the_warm_up_before_it():
    series = [10.0 * i for i in range(10)] + [100.0] * 100 + [50.0, 20.0, 5.0]
    assert steady_window(series, drain=110) == SteadyWindow(10, 110, 113)
    assert steady_window(series, drain=49) is None  # fewer than 10 batches before the drain
