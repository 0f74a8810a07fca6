"""The steady window (MSER-5) of synthetic per-second series whose warm-up and drain are known, and the steady
claims and shaded window of a load run and of a throughput level, each expected value worked out by hand."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim
from loadproof.metrics.figures import LinePlot, panels_of
from loadproof.metrics.steady_state import (
    BATCH_S,
    MIN_BATCHES,
    SteadyWindow,
    mser_truncation,
    steady_claims,
    steady_window,
)
from loadproof.metrics.throughput import level_steady_claims
from loadproof.plans.load import LoadPlan
from loadproof.plans.throughput import ThroughputPlan
from loadproof.records import RequestRecord
from tests import rundir_values as rv
from tests.unit.metrics.test_docs_formulas import docs_text, undocumented
from tests.unit.metrics.test_load import T0, S, plan

WOBBLE = (-2.0, 1.0, 3.0, -1.0, -1.0)  # sums to 0: every 5 s of the flat part average the level exactly


def wobble(i: int) -> float:
    """A deterministic disturbance around a flat level whose every run of 5 seconds averages 0."""
    return WOBBLE[i % len(WOBBLE)]


def ramp_then_flat(ramp_s: int, flat_s: int, level: float = 100.0) -> list[float]:
    return [level * i / ramp_s for i in range(ramp_s)] + [level + wobble(i) for i in range(flat_s)]


# --- the detector ---------------------------------------------------------------------------------------


def test_a_flat_series_is_not_truncated():
    assert steady_window([42.0] * 100) == SteadyWindow(0, 100, 100)
    alternating = [10.0 if i % 2 else 12.0 for i in range(103)]  # every batch mean 10.8 or 11.2
    assert steady_window(alternating) == SteadyWindow(0, 103, 103)


@pytest.mark.parametrize("ramp_s", [10, 17, 23, 40])
def test_a_ramp_is_cut_within_a_batch_of_its_end(ramp_s: int):
    series = ramp_then_flat(ramp_s, 150)
    window = steady_window(series)
    assert window is not None
    assert abs(window.start - ramp_s) <= BATCH_S, window
    assert window.start % BATCH_S == 0
    assert window.end == len(series)  # no drain: nothing cut at the end


@pytest.mark.parametrize("drain_s", [8, 15, 21])
def test_a_drain_is_cut_within_a_batch_of_its_start(drain_s: int):
    flat = [100.0 + wobble(i) for i in range(140)]
    series = flat + [100.0 * (drain_s - i) / drain_s for i in range(1, drain_s + 1)]
    window = steady_window(series)
    assert window is not None
    assert window.start == 0
    assert abs(window.end - len(flat)) <= BATCH_S, window
    assert window.drain_s % BATCH_S == 0


@pytest.mark.parametrize("seed", range(8))
def test_on_a_noisy_series_the_ramp_is_never_kept(seed: int):
    """Noise around the level: MSER's own statistic is noisy, so it may leave out more than the ramp (a few
    batches by chance), never less than all of it but the batch it ends in."""
    draw = random.Random(seed)
    series = [100.0 * i / 23 for i in range(23)] + [draw.gauss(100.0, 10.0) for _ in range(150)]
    window = steady_window(series)
    assert window is not None and window.start >= 23 - BATCH_S + 1
    assert window.start <= (len(series) // BATCH_S // 2) * BATCH_S


def test_warm_up_and_drain_together():
    series = ramp_then_flat(20, 120) + [100.0 * (12 - i) / 12 for i in range(1, 13)]
    window = steady_window(series)
    assert window is not None
    assert abs(window.start - 20) <= BATCH_S and abs(window.end - 140) <= BATCH_S
    assert window.warmup_s == window.start and window.drain_s == len(series) - window.end


def test_a_series_too_short_for_ten_batches_has_no_window():
    assert MIN_BATCHES == 10
    assert steady_window([1.0] * (MIN_BATCHES * BATCH_S - 1)) is None
    assert steady_window([1.0] * (MIN_BATCHES * BATCH_S)) == SteadyWindow(0, 50, 50)


def test_the_warm_up_is_at_most_half_the_batches():
    rising = [float(i) for i in range(100)]  # never steady: every later truncation looks better
    assert mser_truncation(rising) == 10  # 20 batches, at most 10 left out
    window = steady_window(rising)
    assert window is not None and window.start == 50
    assert window.end == 75  # the drain's pass: the 10 batches left, at most 5 of them


def test_mser_picks_the_least_standard_error_and_the_smallest_truncation_on_a_tie():
    # batch means 0, 10, 10, 10, 10, 10: MSER(0) > 0, MSER(1) = MSER(2) = MSER(3) = 0: d* = 1
    series = [0.0] * 5 + [10.0] * 25
    assert mser_truncation(series) == 1
    # batch means 30, 10, 12, 10, 12, 10, 12, 10 (b = 8, d <= 4), worked out by hand
    means = [30.0, 10.0, 12.0, 10.0, 12.0, 10.0, 12.0, 10.0]
    values = []
    for d in range(5):
        rest = means[d:]
        m = sum(rest) / len(rest)
        values.append(sum((z - m) ** 2 for z in rest) / len(rest) ** 2)
    assert mser_truncation([z for z in means for _ in range(5)]) == values.index(min(values)) == 1


# --- a load run's claims --------------------------------------------------------------------------------


def load_rec(i: int, send_s: float, e2e_s: float, tokens: int) -> RequestRecord:
    send = T0 + round(send_s * S)
    end = send + round(e2e_s * S)
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
        first_token_ns=send + S // 10,
        last_token_ns=end,
        end_ns=end,
        prompt_tokens=64,
        output_tokens=tokens,
        chunk_ns=[send + S // 10, end],
        chunk_tokens=[1, tokens - 1],
        planned_input_tokens=64,
        planned_output_tokens=tokens,
    )


# two requests a second for 120 s, each 4 s long and 10 tokens: nothing ends in the first 4 s
STEADY_RECORDS = [load_rec(k, 0.5 * k, 4.0, 10) for k in range(240)]


def run_of(records: list[RequestRecord], steady_window: bool = True):
    p = plan(planned_requests=len(records), rate_rps=2.0, schedule_span_s=119.5, steady_window=steady_window)
    manifest = {"run_id": "load-x", "scenario": "load", "plan": msgspec.to_builtins(p), "plan_version": 1}
    return rv.run_of(Path("load-x"), manifest, records, events=[{"kind": "schedule_start", "t_ns": T0}])


def by_name(claims: list[Claim]) -> dict[str, Claim]:
    return {c.name: c for c in claims}


def test_a_load_run_claims_its_steady_window_beside_the_whole_run():
    got = by_name(compute_claims(run_of(STEADY_RECORDS)))
    duration = 119.5 + 4.0  # the last end, from the schedule's start
    # seconds 0-3 hold nothing, 4-123 two requests each: the first batch (mean 4 tokens/s) is the warm-up
    assert got["load.steady.start_s"].value == 5.0
    assert got["load.steady.end_s"].value == pytest.approx(duration)  # no drain: the run's end
    assert got["load.steady.method"].value == "MSER-5 on output tokens/s: 5 s of warm-up and 0 s of drain left out"
    steady = got["load.steady.output_tokens_per_s"]
    assert steady.value == pytest.approx(119 * 20 / (duration - 5.0))
    assert got["load.steady.request_throughput_rps"].value == pytest.approx(119 * 2 / (duration - 5.0))
    # the unfiltered figures stay as they were, and the steady rate is above them (the warm-up is out)
    assert got["load.output_tokens_per_s"].value == pytest.approx(2400 / duration)
    assert got["load.request_throughput_rps"].value == pytest.approx(240 / duration)
    assert steady.value > got["load.output_tokens_per_s"].value
    assert steady.interval is not None and steady.interval.low <= steady.value <= steady.interval.high
    assert steady.interval.method.endswith("of the per-second series")
    assert "load.steady.unavailable" not in got


def test_a_run_made_before_the_steady_window_recomputes_without_it():
    """A plan without `steady_window` (every bundle published before) reads it as False and gets no steady
    claims, so verify finds none of them missing; every run sets it since."""
    p = msgspec.to_builtins(plan())
    del p["steady_window"]
    assert msgspec.convert(p, LoadPlan).steady_window is False
    names = {c.name for c in compute_claims(run_of(STEADY_RECORDS, steady_window=False))}
    assert "load.output_tokens_per_s" in names
    assert not [n for n in names if ".steady." in n]


def test_a_run_too_short_for_mser_says_why():
    got = by_name(compute_claims(run_of([load_rec(k, 0.5 * k, 4.0, 10) for k in range(60)])))  # 33.5 s
    assert not [n for n in got if n.startswith("load.steady.") and n != "load.steady.unavailable"]
    why = got["load.steady.unavailable"]
    assert why.kind == "fact" and "34 s" in str(why.value) and "10 batches" in str(why.value)


def test_the_rate_plot_shades_the_steady_window():
    run = run_of(STEADY_RECORDS)
    claims = compute_claims(run)
    rate = next(p for p in panels_of(run, claims) if isinstance(p, LinePlot) and p.key == "rate-over-time")
    assert len(rate.spans) == 1
    span = rate.spans[0]
    assert (span.start, span.end) == (5.0, pytest.approx(123.5))
    assert "steady window (MSER-5)" in span.label and "load.steady" in rate.caption


# --- a throughput level ---------------------------------------------------------------------------------


def level_rec(family: str, conc: int, i: int, send_s: float, end_s: float, out: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"{family}-{conc}-{i}",
        endpoint="completions",
        scenario="throughput",
        family=family,
        concurrency=conc,
        batch=i,
        ok=True,
        send_ns=round(send_s * S),
        first_token_ns=round((send_s + 0.1) * S),
        last_token_ns=round(end_s * S),
        end_ns=round(end_s * S),
        output_tokens=out,
    )


def test_a_throughput_level_gets_its_steady_window_and_a_short_one_says_why():
    # a level of 100 batches of one second each, the first 12 s slower (2 tokens a second, then 8)
    long = [level_rec("english", 4, i, 10.0 + i, 10.5 + i, 2 if i < 12 else 8) for i in range(100)]
    short = [level_rec("code", 4, i, 200.0 + i, 200.5 + i, 8) for i in range(20)]
    got = by_name(level_steady_claims(long + short))
    assert got["throughput.english.c4.steady.start_s"].value == 15.0  # batches 0-2 rise out of the warm-up
    assert got["throughput.english.c4.steady.end_s"].value == pytest.approx(99.5)
    assert got["throughput.english.c4.steady.output_tokens_per_s"].value == pytest.approx(8 * 85 / (99.5 - 15.0))
    assert got["throughput.english.c4.steady.output_tokens_per_s"].pattern == (
        "throughput.<family>.c<N>.steady.output_tokens_per_s"
    )
    assert "throughput.english.c4.steady.request_throughput_rps" not in got
    assert "throughput.code.c4.steady.unavailable" in got
    assert not [n for n in got if n.startswith("throughput.code.c4.steady.") and not n.endswith("unavailable")]


def test_a_throughput_plan_from_before_has_no_steady_window():
    old = {"families": ["english"], "concurrency": [1], "max_tokens": 8}
    assert msgspec.convert(old, ThroughputPlan).steady_window is False


def test_steady_claims_without_output_tokens_find_the_window_on_the_requests():
    ends = [T0 + round((4 + 0.5 * k) * S) for k in range(200)]
    got = by_name(steady_claims("load", ends, None, T0, 104.0, "the schedule's start"))
    assert got["load.steady.start_s"].value == 5.0
    assert "successful requests/s" in str(got["load.steady.method"].value)
    assert "load.steady.output_tokens_per_s" not in got
    assert got["load.steady.request_throughput_rps"].value == pytest.approx(198 / 99.0)


def test_every_steady_claim_is_documented():
    load = compute_claims(run_of(STEADY_RECORDS)) + compute_claims(run_of(STEADY_RECORDS[:60]))
    levels = [level_rec("english", 4, i, 10.0 + i, 10.5 + i, 8) for i in range(100)]
    levels += [level_rec("code", 4, i, 200.0 + i, 200.5 + i, 8) for i in range(20)]
    steady = [c for c in load + level_steady_claims(levels) if ".steady." in c.name]
    assert {c.pattern.rsplit(".", 1)[-1] for c in steady} >= {"method", "start_s", "end_s", "unavailable"}
    assert undocumented(steady, docs_text()) == []
