"""Open-loop load claims from a hand-built run: every figure computed by hand beside it."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.load import load_claims
from loadproof.metrics.slo import slo_values
from loadproof.plans.load import LoadLengths, LoadPlan
from loadproof.records import RequestRecord
from tests import rundir_values as rv

S = 1_000_000_000
T0 = 100 * S


def rec(
    i: int,
    intended: float,
    send: float,
    ttft: float | None = None,
    gaps: tuple[float, ...] = (),
    tokens: int | None = None,
    ok: bool = True,
    error: str | None = None,
    end: float | None = None,
    dispatch: float | None = None,
    prompt_tokens: int = 64,
) -> RequestRecord:
    """A load record; times in seconds after the schedule's start."""
    chunk_ns: list[int] = []
    if ttft is not None:
        t = send + ttft
        chunk_ns.append(T0 + round(t * S))
        for gap in gaps:
            t += gap
            chunk_ns.append(T0 + round(t * S))
    last = chunk_ns[-1] if chunk_ns else None
    return RequestRecord(
        request_id=f"load-{i}",
        endpoint="completions",
        scenario="load",
        family="synthetic",
        batch=i,
        ok=ok,
        error_kind=error,
        send_ns=T0 + round(send * S),
        intended_send_ns=T0 + round(intended * S),
        dispatch_ns=T0 + round((intended if dispatch is None else dispatch) * S),
        first_token_ns=chunk_ns[0] if chunk_ns else None,
        last_token_ns=last,
        end_ns=last + S // 100 if end is None and last is not None else T0 + round((end or send) * S),
        prompt_tokens=prompt_tokens if ttft is not None else None,
        output_tokens=tokens if tokens is not None else (len(chunk_ns) or None),
        chunk_ns=chunk_ns,
        chunk_tokens=[1] * len(chunk_ns),
        planned_input_tokens=64,
        planned_output_tokens=4,
    )


def plan(**changes) -> LoadPlan:
    base = LoadPlan(
        arrival="poisson",
        rate_rps=1.0,
        seed=731,
        planned_requests=8,
        schedule_span_s=7.0,
        input_tokens=LoadLengths(kind="fixed", a=64, text="64"),
        output_tokens=LoadLengths(kind="fixed", a=4, text="4"),
        slo={"ttft": 0.5, "tpot": 0.1},
    )
    return msgspec.structs.replace(base, **changes)


RECORDS = [
    # ok, 4 tokens: ttft 0.2, gaps 0.05 0.05 0.05: tpot 0.05 -> good
    rec(0, 1.0, 1.001, 0.2, (0.05, 0.05, 0.05)),
    # ok: ttft 0.6 misses the ttft SLO
    rec(1, 2.0, 2.002, 0.6, (0.05, 0.05, 0.05)),
    # ok: tpot (0.3 + 0.05 + 0.05) / 3 = 0.1333 misses tpot; itl max 0.3
    rec(2, 3.0, 3.0005, 0.1, (0.3, 0.05, 0.05)),
    # ok, good: ttft 0.3, tpot 0.08; a long send lag (0.5 s) inside a --max-concurrency wait
    rec(3, 4.0, 4.5, 0.3, (0.08, 0.08, 0.08), dispatch=4.0001),
    # failed with HTTP 500, fast: never good
    rec(4, 5.0, 5.001, ok=False, error="http_status", end=5.01),
    # timed out after its first token: never good, its latencies not counted
    rec(5, 6.0, 6.001, 0.1, (0.05,), ok=False, error="timeout", end=9.0),
    # ok but the server counted 63 prompt tokens where 64 were built
    rec(6, 7.0, 7.001, 0.2, (0.05, 0.05, 0.05), prompt_tokens=63),
]
EVENTS = [{"kind": "schedule_start", "t_ns": T0}]


def claims(records=RECORDS, p=None, events=EVENTS, samples=()) -> dict[str, object]:
    return {c.name: c.value for c in load_claims(list(records), p or plan(), rv.events(events), rv.samples(samples))}


def test_counts_and_the_interrupted_schedule():
    got = claims()
    assert got["load.planned_requests"] == 8 and got["load.requests"] == 7
    assert got["load.failed_requests"] == 2
    assert got["load.schedule_completed"] is False  # 7 of 8 sent: the schedule did not finish


def test_goodput_counts_failed_and_timed_out_requests_as_not_good():
    got = claims()
    # good: 0, 3, 6 (ttft <= 0.5 and tpot <= 0.1); 1 misses ttft, 2 misses tpot, 4 and 5 failed
    duration = 9.0  # the schedule's start to the last end (the timed-out request's, at 9.0 s)
    assert got["load.duration_s"] == pytest.approx(duration)
    assert got["load.good_requests"] == 3
    assert got["load.goodput_rps"] == pytest.approx(3 / duration)
    assert got["load.slo_attainment_pct"] == pytest.approx(100 * 3 / 7)  # of all 7, failures included
    assert got["load.slo.ttft.met_pct"] == pytest.approx(100 * 4 / 7)
    assert got["load.slo.tpot.met_pct"] == pytest.approx(100 * 4 / 7)
    assert got["load.slo"] == "ttft <= 500 ms, tpot <= 100 ms"


def test_itl_slos_are_the_requests_own_max_and_p99():
    values = slo_values(RECORDS[2])
    assert values is not None
    assert values["itl"] == pytest.approx(0.3)
    assert values["itl_p99"] == pytest.approx(0.05 + 0.98 * 0.25)  # sorted 0.05 0.05 0.3: h = 1.98
    assert values["tpot"] == pytest.approx(0.4 / 3)
    assert slo_values(RECORDS[4]) is None and slo_values(RECORDS[5]) is None
    got = claims(p=plan(slo={"itl": 0.2}))
    assert got["load.good_requests"] == 4  # all but request 2 of the five that succeeded


def test_latency_distributions_are_of_successful_requests():
    got = claims()
    ttfts = sorted([0.2, 0.6, 0.1, 0.3, 0.2])
    assert got["load.ttft_s.mean"] == pytest.approx(sum(ttfts) / 5)
    assert got["load.ttft_s.p50"] == pytest.approx(0.2)
    assert got["load.ttft_s.max"] == pytest.approx(0.6)
    assert got["load.ttft_s.p90"] == pytest.approx(0.3 + 0.6 * 0.3)  # h = 3.6
    # ITL: every gap of the five, one sample each: eleven of 0.05, three of 0.08, one of 0.3
    assert got["load.itl_s.max"] == pytest.approx(0.3)
    assert got["load.itl_s.p50"] == pytest.approx(0.05)
    assert got["load.itl_s.mean"] == pytest.approx((11 * 0.05 + 3 * 0.08 + 0.3) / 15)
    assert got["load.tpot_s.max"] == pytest.approx(0.4 / 3)
    assert got["load.e2el_s.max"] == pytest.approx(0.75)  # request 1: 0.6 + 3 x 0.05
    assert got["load.e2el_from_intended_s.max"] == pytest.approx(0.5 + 0.54)  # request 3 waited 0.5 s to be sent
    assert got["load.ttft_from_intended_s.max"] == pytest.approx(0.8)


def test_send_lag_and_its_parts():
    got = claims()
    assert got["load.send_lag_s.max"] == pytest.approx(0.5)
    assert got["load.send_lag_s.p50"] == pytest.approx(0.001)
    assert got["load.client_lag_s.max"] == pytest.approx(0.0001)
    assert got["load.queue_wait_s.max"] == pytest.approx(0.4999)
    assert got["load.client_limited"] is False


def test_rates():
    got = claims()
    assert got["load.offered_rate_rps"] == pytest.approx(7 / 7.0)
    assert got["load.achieved_rate_rps"] == pytest.approx(7 / 7.001)
    assert got["load.request_throughput_rps"] == pytest.approx(5 / 9.0)
    assert got["load.output_tokens_per_s"] == pytest.approx(20 / 9.0)
    assert got["load.input_tokens_mismatched"] == 1 and got["load.output_tokens_mismatched"] == 0


def test_without_an_slo_there_is_no_goodput_and_without_an_event_the_first_intended_send_starts():
    got = claims(p=plan(slo={}), events=[])
    assert "load.goodput_rps" not in got and "load.slo_attainment_pct" not in got
    assert got["load.duration_s"] == pytest.approx(9.0 - 1.0)


def test_engine_claims_from_the_samples_during_the_schedule():
    samples = [
        {"t_ns": T0 - S, "values": {"num_preemptions_total": 2.0, "num_requests_waiting": 9.0}},
        {
            "t_ns": T0 + 2 * S,
            "values": {
                "num_requests_waiting": 3.0,
                "num_requests_running": 5.0,
                "kv_cache_usage_perc": 0.5,
                "num_preemptions_total": 3.0,
            },
        },
        {
            "t_ns": T0 + 4 * S,
            "values": {
                "num_requests_waiting": 1.0,
                "num_requests_running": 7.0,
                "kv_cache_usage_perc": 0.25,
                "num_preemptions_total": 4.0,
            },
        },
        {"t_ns": T0 + 10 * S, "values": {"num_requests_waiting": 0.0, "num_preemptions_total": 6.0}},
    ]
    got = claims(samples=samples)
    assert got["load.engine_waiting_max"] == 3  # the 9 before the start is not the run's
    assert got["load.engine_running_max"] == 7
    assert got["load.engine_kv_usage_max_pct"] == pytest.approx(50.0)
    assert got["load.engine_preemptions"] == 4


def test_a_run_directory_computes_the_same_claims_through_compute_claims():
    manifest = {"run_id": "load-x", "scenario": "load", "plan": msgspec.to_builtins(plan()), "plan_version": 1}
    run = rv.run_of(Path("load-x"), manifest, RECORDS, events=EVENTS)
    names = {c.name for c in compute_claims(run)}
    contract = {
        "load.achieved_rate_rps",
        "load.requests",
        "load.failed_requests",
        "load.output_tokens_per_s",
        "load.goodput_rps",
        "load.slo_attainment_pct",
        "load.ttft_s.mean",
        "load.ttft_s.p50",
        "load.ttft_s.p90",
        "load.ttft_s.p99",
        "load.itl_s.p50",
        "load.itl_s.p99",
        "load.tpot_s.p50",
        "load.tpot_s.p99",
        "load.e2el_s.p50",
        "load.e2el_s.p99",
        "load.send_lag_s.p50",
        "load.send_lag_s.p99",
        "load.send_lag_s.max",
    }
    assert contract <= names, contract - names
