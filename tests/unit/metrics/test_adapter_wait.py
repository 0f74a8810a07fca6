"""Waiting for a LoRA slot (metrics.adapter_wait), by hand: each model's time with requests in flight and none
started, each adapter's TTFT against the base model's nearest requests, and the adapter-seconds the engine's
lora_requests_info did not list; and the H200 run that showed it (docs/runs/h200-2026-12-02-lora/3-churn: four
adapters on two slots, two of them waiting 22-23 s while the churn replay priced a cold adapter at 0.06 s)."""

from __future__ import annotations

import json

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.adapter_wait import over_base_s, unlisted_adapter_ns, unstarted_ns, wait_claims
from loadproof.plans.load import MixedModel
from loadproof.protocol.vllm_metrics import VLLM_METRICS
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import Run, load_run
from loadproof.telemetry.server_metrics import parse_metrics
from tests import bundles
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000
T0 = 100 * S  # the run's clock (a send_ns of 0 is a request never sent)


def rec(i: int, model: str, send: float, first: float | None, end: float) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{i}",
        endpoint="completions",
        scenario="load",
        model=model,
        ok=first is not None,
        error_kind=None if first is not None else "http_status",
        send_ns=T0 + round(send * S),
        first_token_ns=None if first is None else T0 + round(first * S),
        last_token_ns=None if first is None else T0 + round(end * S),
        end_ns=T0 + round(end * S),
        output_tokens=None if first is None else 4,
    )


def test_unstarted_is_the_time_every_request_in_flight_waited():
    # [0, 2): r0 waits; [2, 5) r0 streams; [5, 6) r1 waits alone; [6, 8) streams; [10, 12) r2 fails unstarted
    rows = [rec(0, "a", 0, 2, 5), rec(1, "a", 1, 6, 8), rec(2, "a", 10, None, 12)]
    assert unstarted_ns(rows) == 5 * S
    # a request that starts as another ends: no gap of waiting counted at that instant
    assert unstarted_ns([rec(0, "a", 0, 1, 3), rec(1, "a", 2, 3, 4)]) == 1 * S
    assert unstarted_ns([]) == 0


def test_ttft_over_the_base_models_nearest_requests():
    # base requests sent at 0..9 s, TTFT 0.1 s x (1 + send): the 5 nearest a request sent at 4.4 s are those sent
    # at 4, 5, 3, 6 and 2 s (TTFT 0.5, 0.6, 0.4, 0.7, 0.3: p50 0.5)
    base = [rec(i, "base", i, i + 0.1 * (1 + i), i + 2) for i in range(10)]
    sends = [r.send_ns for r in base]
    assert over_base_s(rec(20, "a", 4.4, 7.4, 9), base, sends) == pytest.approx(3.0 - 0.5)
    # at the edge: the five first (TTFT 0.1 to 0.5: p50 0.3); a tie goes to the earlier
    assert over_base_s(rec(21, "a", 0.0, 1.0, 2), base, sends) == pytest.approx(1.0 - 0.3)
    # from 2.5 s: 2 and 3 s tie (2 first), then 1 and 4, then 0 (TTFT 0.3, 0.4, 0.2, 0.5, 0.1: p50 0.3)
    assert over_base_s(rec(22, "a", 2.5, 3.0, 4), base, sends) == pytest.approx(0.5 - 0.3)


def sample(t: float, listed: int, deferred: float | None = None) -> EngineSample:
    values = {"lora_running_adapters": float(listed), "lora_waiting_adapters": float(listed)}
    if deferred is not None:
        values["num_requests_waiting_by_reason_deferred"] = deferred
    return EngineSample(t_ns=T0 + round(t * S), values=values)


def test_the_engine_lists_an_adapter_only_once_a_request_of_it_is_scheduled():
    # a in flight 0-10 s, b 1-10 s, c 2-9 s; the engine lists 2 from 1 s on: c unlisted from 2 s to 8 s, the last
    # sample in the run (the interval after a sample counts at its value)
    rows = [rec(0, "a", 0, 0.2, 10), rec(1, "b", 1, 1.2, 10), rec(2, "c", 2, 8.5, 9)]
    samples = [sample(0.5, 1), sample(1.5, 2), sample(2.5, 2), sample(5, 2), sample(8, 2), sample(20, 0)]
    assert unlisted_adapter_ns(rows, {"a", "b", "c"}, samples) == round(5.5 * S)
    assert unlisted_adapter_ns(rows, {"x"}, samples) == 0


RECORDS = [
    rec(0, "base", 0, 0.1, 3),
    rec(1, "a", 0.5, 0.7, 4),
    rec(2, "b", 1, 1.2, 4),
    rec(3, "c", 1.5, 5.0, 7),  # two slots busy: c waits until a and b end
    rec(4, "base", 2, 2.1, 5),
    rec(5, "base", 3, 3.2, 6),
]
SAMPLES = [sample(0.0, 0), sample(1.0, 1), sample(2.0, 2, 1.0), sample(4.5, 1, 0.0), sample(8.0, 0, 0.0)]


def test_the_claims_of_a_mix_with_its_base_model_named():
    got = {c.name: c.value for c in wait_claims(RECORDS, ["base", "a", "b", "c"], "base", SAMPLES)}
    assert got["load.model.c.unstarted_s"] == pytest.approx(3.5)
    # the base model waited only before its first request's first token: each later one was sent while one streamed
    assert got["load.model.base.unstarted_s"] == pytest.approx(0.1)
    # c's TTFT 3.5 s against the three base requests' p50 (0.1 s): one request, so p50 = max
    assert got["load.model.c.ttft_over_base_s.p50"] == pytest.approx(3.4)
    assert got["load.model.c.ttft_over_base_s.max"] == pytest.approx(3.4)
    assert got["load.model.a.ttft_over_base_s.p50"] == pytest.approx(0.1)
    assert "load.model.base.ttft_over_base_s.p50" not in got
    # samples at 0, 1, 2, 4.5 s (the last, 8 s, ends the run): a, b, c in flight and 2 listed from 2 s to 4.5 s;
    # at 1 s a and b in flight, one listed
    assert got["load.lora.engine_unlisted_adapter_s"] == pytest.approx(1.0 + 2.5)
    # no base model named (runs before it), or it is not in the mix: nothing
    assert wait_claims(RECORDS, ["base", "a", "b", "c"], None, SAMPLES) == []
    assert wait_claims(RECORDS, ["a", "b", "c"], "base", SAMPLES) == []


def mix_run() -> Run:
    plan = msgspec.structs.replace(
        test_load.plan(),
        model_mix=[MixedModel(model=m, weight=1.0) for m in ("base", "a", "b", "c")],
        base_model="base",
    )
    records = [msgspec.structs.replace(r, scenario="load", batch=i) for i, r in enumerate(RECORDS)]
    return rv.run_of(None, {"scenario": "load", "plan": msgspec.to_builtins(plan)}, records, samples=SAMPLES)


def test_a_load_run_with_a_base_model_claims_the_wait_and_the_engines_deferred_queue():
    got = {c.name: c.value for c in compute_claims(mix_run())}
    assert got["load.model.c.ttft_over_base_s.p50"] == pytest.approx(3.4)
    assert got["load.engine_deferred_max"] == 1


def test_the_engines_queue_by_reason_is_read_per_reason():
    # vLLM 0.32's exposition during the embedded engine's LoRA run (max_loras 2, four adapters asked for)
    text = (
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="gemma-3-270m",reason="capacity"} 0.0\n'
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="gemma-3-270m",reason="deferred"} 24.0\n'
    )
    names = {"num_requests_waiting_by_reason": VLLM_METRICS["num_requests_waiting_by_reason"]}
    assert parse_metrics(text, names) == {
        "num_requests_waiting_by_reason_capacity": 0.0,
        "num_requests_waiting_by_reason_deferred": 24.0,
    }


def test_the_h200_churn_run_two_adapters_waited_for_a_slot_while_the_replay_priced_a_load():
    folder = next((bundles.DOCS_RUNS / "h200-2026-12-02-lora" / "3-churn" / "runs").iterdir())
    run = load_run(folder)
    published = {c["name"]: c["value"] for c in json.loads((folder / "claims.json").read_text())["claims"]}
    assert published["load.lora.cold_cost_s"] == pytest.approx(0.06, abs=0.01)
    got = {
        c.name: c.value for c in wait_claims(run.records, ["llama-8b-shape", *"abcd"], "llama-8b-shape", run.samples)
    }
    assert got["load.model.a.ttft_over_base_s.p50"] == pytest.approx(22.03, abs=0.01)
    assert got["load.model.d.ttft_over_base_s.p50"] == pytest.approx(23.28, abs=0.01)
    assert abs(got["load.model.b.ttft_over_base_s.p50"]) < 0.01 and abs(got["load.model.c.ttft_over_base_s.p50"]) < 0.01
    assert got["load.model.a.unstarted_s"] == pytest.approx(35.37, abs=0.01)
    assert got["load.model.d.unstarted_s"] == pytest.approx(37.45, abs=0.01)
    # the engine listed 2 adapters throughout while the records had 4 in flight: about a's and d's wait together
    unstarted = sum(got[f"load.model.{m}.unstarted_s"] for m in "abcd")
    assert got["load.lora.engine_unlisted_adapter_s"] == pytest.approx(unstarted, rel=0.02)


def docs_runs(_tmp_path) -> list[Run]:  # tests/unit/metrics/test_docs_formulas.py
    return [mix_run()]
