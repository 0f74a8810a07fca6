"""The step-cost model: monotone in context and batch, CUDA-graph padding, speculative decoding, and
pipeline stages that overlap two prefills; plus the leave-one-out table in docs/simulator.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loadproof.predict.virtual import VirtualRun
from loadproof.sim.config import CostModel, SimConfig, default_capture_sizes, expected_tokens

ROOT = Path(__file__).parents[3]
COST = CostModel(
    step_overhead_s=0.004,
    decode_s_per_seq=3e-4,
    decode_s_per_ctx_token=2e-9,
    decode_s_per_ctx_token_max=1e-9,
    cuda_graph_sizes=default_capture_sizes(128),
    spec_draft_by_batch=[[4, 5], [32, 3]],
    spec_acceptance=0.7,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 1_000_000), min_size=1, max_size=40), st.integers(0, 39), st.integers(1, 200_000))
def test_decode_step_time_is_monotone_in_context_and_batch(contexts, index, extra):
    base = COST.decode_s(contexts, graphs=True)
    longer = list(contexts)
    longer[index % len(contexts)] += extra
    assert COST.decode_s(longer, graphs=True) > base  # more context in any one sequence costs more
    assert COST.decode_s(contexts + [1], graphs=True) >= base  # one more sequence never costs less
    # per emitted token (speculative decoding) the step of a larger batch costs at least as much in total
    assert COST.step_s([], contexts + [1]) * COST.tokens_per_step(len(contexts) + 1) >= base


def test_cuda_graph_padding_and_speculative_tokens():
    assert COST.padded(5) == 8 and COST.padded(9) == 16 and COST.padded(129) == 129
    assert expected_tokens(0.0, 3) == 1 and expected_tokens(1.0, 3) == 4
    assert expected_tokens(0.5, 3) == 1 + 0.5 + 0.25 + 0.125
    assert COST.draft_length(4) == 5 and COST.draft_length(5) == 3 and COST.draft_length(33) == 0


def first_tokens(stages: int) -> list[float]:
    cost = CostModel(step_overhead_s=0.0, prefill_s_per_token=1e-3, decode_s_per_seq=0.0, pipeline_stages=stages)
    run = VirtualRun(SimConfig(max_num_batched_tokens=256, num_gpu_blocks=1000, cost=cost))
    for rid in ("a", "b"):
        run.add(rid, 256, 1, salt=rid)
    run.advance(lambda: all(run.token_times[r] for r in ("a", "b")), 100.0)
    return [run.token_times["a"][0], run.token_times["b"][0]]


def test_two_pipeline_stages_overlap_two_prefills():
    assert first_tokens(1) == [0.256, 0.512]  # one after the other
    a, b = first_tokens(2)  # b enters stage 1 while a is in stage 2
    assert a == 0.256 and abs(b - 0.384) < 1e-9


def test_a_long_prompt_keeps_both_stages_busy():
    cost = CostModel(step_overhead_s=0.0, prefill_s_per_token=1e-3, decode_s_per_seq=0.0, pipeline_stages=2)
    run = VirtualRun(SimConfig(max_num_batched_tokens=256, num_gpu_blocks=1000, cost=cost))
    run.add("a", 256 * 8, 1, salt="a")
    run.advance(lambda: bool(run.token_times["a"]), 100.0)
    assert abs(run.token_times["a"][0] - (8 + 1) * 0.128) < 1e-9  # chunk k+1 enters while chunk k is in stage 2


def test_docs_hold_the_leave_one_out_table_the_benchmark_computes():
    spec = importlib.util.spec_from_file_location("sim_accuracy", ROOT / "benchmarks" / "sim_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sim_accuracy"] = module
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(module)
    doc = (ROOT / "docs" / "simulator.md").read_text()
    held = doc[doc.index(module.MARK_BEGIN) + len(module.MARK_BEGIN) : doc.index(module.MARK_END)].strip()
    assert held == module.loo_table([module.DOCS_RUNS]).strip()


def test_open_loop_prediction_matches_the_closed_form_when_alone_and_queues_when_overloaded():
    from loadproof.metrics.latency import samples_ns
    from loadproof.predict.load import predict_load

    cost = CostModel(step_overhead_s=0.01, prefill_s_per_token=1e-4, decode_s_per_seq=1e-3, request_overhead_s=0.02)
    cfg = SimConfig(max_num_batched_tokens=512, num_gpu_blocks=4000, max_model_len=4096, cost=cost)
    sparse = predict_load(cfg, [i * 10.0 for i in range(5)], [256] * 5, [8] * 5)  # one at a time
    ttft = samples_ns(sparse.records)["ttft_s"]
    assert all(abs(t / 1e9 - (0.02 + 0.01 + 256e-4)) < 1e-6 for t in ttft)
    tpot = samples_ns(sparse.records)["tpot_s"]
    assert all(abs(t / 1e9 - 0.011) < 1e-6 for t in tpot)
    dense = predict_load(cfg, [i * 0.001 for i in range(200)], [256] * 200, [8] * 200)
    assert all(r.ok and r.output_tokens == 8 for r in dense.records)
    assert max(samples_ns(dense.records)["ttft_s"]) > 5 * max(ttft)  # a burst queues
    capped = predict_load(cfg, [0.0] * 20, [256] * 20, [8] * 20, max_concurrency=2)
    starts = sorted(r.send_ns for r in capped.records)
    assert starts[0] == starts[1] == 0 and starts[2] > 0  # the third waits for a free slot
