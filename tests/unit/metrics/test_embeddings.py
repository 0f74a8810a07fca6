"""An embeddings load run's claims, by hand: each answer is one body (its first token its last), so the run
claims latency (e2el), input tokens/s and vectors, and none of the output-token figures; the engine's prompt
tokens are set beside the client's, and nothing generated is."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics.engine_agreement import agreement_claims
from tests import rundir_values as rv
from tests.unit.metrics import test_load
from tests.unit.metrics.test_load import T0, S, rec


def embedded(i: int, send: float, latency: float | None, vectors: int = 3, tokens: int = 150):
    """An embeddings record: its answer arrived `latency` s after its send (None: it failed)."""
    base = rec(
        i,
        send,
        send,
        latency,
        (),
        tokens=0 if latency is not None else None,
        ok=latency is not None,
        prompt_tokens=tokens,
    )
    return msgspec.structs.replace(
        base,
        endpoint="embeddings",
        vectors=vectors if latency is not None else None,
        chunk_usage=False,
        chunk_tokens=[0] * len(base.chunk_ns),
        planned_input_tokens=150,
        planned_output_tokens=0,
    )


RECORDS = [embedded(0, 0.0, 0.2), embedded(1, 1.0, 0.4), embedded(2, 2.0, 0.3, tokens=149), embedded(3, 3.0, None)]


def claims(slo=None) -> dict[str, object]:
    plan = test_load.plan(
        endpoint="embeddings", inputs_per_request=3, planned_requests=4, slo=slo if slo is not None else {"e2el": 0.35}
    )
    return test_load.claims(RECORDS, plan)


def test_rates_and_latency_of_an_embeddings_run_by_hand():
    got = claims()
    duration = (max(r.end_ns for r in RECORDS) - T0) / S  # the failed request's end, at 3.0 s
    assert got["load.duration_s"] == pytest.approx(duration)
    assert got["load.request_throughput_rps"] == pytest.approx(3 / duration)
    assert got["load.input_tokens_per_s"] == pytest.approx((150 + 150 + 149) / duration)
    assert got["load.embeddings.vectors_per_s"] == pytest.approx(9 / duration)
    assert got["load.embeddings.vectors_per_request"] == 3.0
    assert got["load.e2el_s.p50"] == pytest.approx(0.3)
    assert got["load.input_tokens_mismatched"] == 1  # 149 tokens where 150 were planned
    assert got["load.good_requests"] == 2 and got["load.slo_attainment_pct"] == pytest.approx(50.0)  # 0.2, 0.3
    assert not [n for n in got if n.startswith(("load.ttft_s", "load.tpot_s", "load.itl_s", "load.output_tokens"))]


def test_only_the_prompt_tokens_are_set_beside_the_engines_counters():
    samples = rv.samples(
        [
            {"t_ns": T0 - 1, "values": {"prompt_tokens_total": 0.0, "generation_tokens_total": 0.0}},
            {"t_ns": T0 + 10 * S, "values": {"prompt_tokens_total": 449.0, "generation_tokens_total": 0.0}},
        ]
    )
    got = {c.name: c.value for c in agreement_claims(RECORDS, samples)}
    assert got == {
        "crosscheck.prompt_tokens.client": 449,
        "crosscheck.prompt_tokens.engine": 449.0,
        "crosscheck.prompt_tokens.diff_pct": 0.0,
    }


def test_a_rerank_run_claims_documents_where_an_embeddings_run_claims_vectors():
    records = [msgspec.structs.replace(r, endpoint="rerank") for r in RECORDS]
    plan = test_load.plan(endpoint="rerank", inputs_per_request=3, planned_requests=4, slo={"e2el": 0.35})
    got = test_load.claims(records, plan)
    duration = (max(r.end_ns for r in RECORDS) - T0) / S
    assert got["load.rerank.documents_per_s"] == pytest.approx(9 / duration)  # 3 documents scored a request
    assert got["load.rerank.documents_per_request"] == 3.0
    assert got["load.input_tokens_per_s"] == pytest.approx((150 + 150 + 149) / duration)
    assert not [n for n in got if n.startswith(("load.embeddings", "load.ttft_s", "load.output_tokens"))]
    samples = rv.samples(
        [
            {"t_ns": T0 - 1, "values": {"prompt_tokens_total": 0.0, "generation_tokens_total": 0.0}},
            {"t_ns": T0 + 10 * S, "values": {"prompt_tokens_total": 449.0, "generation_tokens_total": 0.0}},
        ]
    )
    assert {c.name for c in agreement_claims(records, samples)} == {
        "crosscheck.prompt_tokens.client",
        "crosscheck.prompt_tokens.engine",
        "crosscheck.prompt_tokens.diff_pct",
    }
