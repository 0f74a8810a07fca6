"""Adapter churn, by hand: requests for three adapters through two slots, cold by the LRU replay of the send
order, and the cold cost from their TTFTs; nothing without a profile's [lora]."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics import compute_claims
from loadproof.metrics.adapter_churn import churn_claims, cold_flags
from loadproof.plans.load import MixedModel
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000
PROFILE = {
    "name": "p",
    "engine": "vllm",
    "lora": {"adapters": {"a": "/a", "b": "/b", "c": "/c"}, "max_loras": 1, "max_cpu_loras": 2},
}
# a, b, a (warm), c (cold: evicts b), b (cold: evicts a), a (cold), base (no adapter)
ORDER = ["a", "b", "a", "c", "b", "a", "base"]
TTFT = {True: 0.9, False: 0.1}


def records() -> list[RequestRecord]:
    cold = [True, True, False, True, True, True, False]
    return [
        RequestRecord(
            request_id=f"r{i}",
            endpoint="completions",
            scenario="load",
            model=m,
            ok=True,
            send_ns=(i + 1) * S,
            first_token_ns=(i + 1) * S + int(TTFT[c] * S) + i * 1000,
            last_token_ns=(i + 2) * S,
            end_ns=(i + 2) * S,
            output_tokens=4,
        )
        for i, (m, c) in enumerate(zip(ORDER, cold))
    ]


def test_cold_by_the_lru_replay_and_the_cost():
    flags = cold_flags(records(), {"a", "b", "c"}, 2)
    assert [(r.model, c) for r, c in flags] == [
        ("a", True),
        ("b", True),
        ("a", False),
        ("c", True),
        ("b", True),
        ("a", True),
    ]
    got = {c.name: c.value for c in churn_claims(records(), PROFILE)}
    assert got["load.lora.adapters"] == 3 and got["load.lora.slots"] == 2 and got["load.lora.cold_requests"] == 5
    assert got["load.lora.cold_ttft_s.p50"] == pytest.approx(0.9, abs=1e-5)
    assert got["load.lora.warm_ttft_s.p50"] == pytest.approx(0.1, abs=1e-5)
    assert got["load.lora.cold_cost_s"] == pytest.approx(0.8, abs=1e-5)


def test_slots_default_to_max_loras_and_no_lora_no_claims():
    profile = {"lora": {"adapters": {"a": "/a", "b": "/b"}, "max_loras": 2}}
    assert {c.name: c.value for c in churn_claims(records(), profile)}["load.lora.slots"] == 2
    assert churn_claims(records(), {"name": "p"}) == [] and churn_claims(records(), None) == []


def churn_run() -> Run:
    plan = msgspec.structs.replace(test_load.plan(), model_mix=[MixedModel(model=m, weight=1.0) for m in "abc"])
    return rv.run_of(None, {"scenario": "load", "plan": msgspec.to_builtins(plan), "profile": PROFILE}, records())


def test_a_load_run_with_a_lora_profile_claims_its_churn():
    assert "load.lora.cold_cost_s" in {c.name for c in compute_claims(churn_run())}


def docs_runs(_tmp_path) -> list[Run]:  # tests/unit/metrics/test_docs_formulas.py
    return [churn_run()]
