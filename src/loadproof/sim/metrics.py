"""The simulator's /metrics in vLLM's Prometheus names, labels `model_name` and `engine` as vLLM sets them,
vLLM's `cache_config_info` gauge describing its KV cache, and its multimodal processor cache's counters
(`vllm:mm_cache_queries`, `vllm:mm_cache_hits`: media items, as vLLM 0.32's `v1/metrics/loggers.py` names them)."""

from __future__ import annotations

from loadproof.protocol.vllm_metrics import VLLM_METRICS
from loadproof.sim.config import SimConfig
from loadproof.sim.prompt import MediaCache
from loadproof.sim.scheduler import TTFT_BUCKETS_S, Scheduler

_GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")
_COUNTERS = (
    "num_preemptions_total",
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "prompt_tokens_total",
    "generation_tokens_total",
)


def cache_config_labels(config: SimConfig) -> dict[str, str]:
    """vLLM's `cache_config_info` labels (its CacheConfig's fields as strings, and `engine`) for the simulator's
    pool. vLLM counts its null block, which never holds KV, in `num_gpu_blocks` (and so in
    `kv_cache_size_tokens`); the simulator's `num_gpu_blocks` blocks are all usable, so it reports one more, and a
    reader that sets the null block aside (loadproof's replay and sessions expectations) gets its pool exactly.
    `num_cpu_blocks` stays None as in vLLM, whose native offloading (the CPU tier) does not set it;
    `gpu_memory_utilization` is vLLM's default (the simulator has no GPU)."""
    blocks = config.num_gpu_blocks + 1
    return {
        "block_size": str(config.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": str(config.enable_prefix_caching),
        "gpu_memory_utilization": "0.92",
        "is_attention_free": "False",
        "kv_cache_size_tokens": str(blocks * config.block_size),
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(blocks),
        "num_gpu_blocks_override": "None",
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
        "engine": "0",
    }


MM_CACHE = ("vllm:mm_cache_queries", "vllm:mm_cache_hits")  # counters: served with their `_total`


def render_metrics(model: str, scheduler: Scheduler, mm_cache: MediaCache | None = None) -> str:
    labels = f'engine="0",model_name="{model}"'
    values = scheduler.gauges()
    info = ",".join(f'{k}="{v}"' for k, v in cache_config_labels(scheduler.config).items())
    lines: list[str] = [
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f"vllm:cache_config_info{{{info}}} 1.0",
    ]
    for key in _GAUGES:
        name = VLLM_METRICS[key]
        lines += [f"# TYPE {name} gauge", f"{name}{{{labels}}} {values[key]}"]
    for key in _COUNTERS:
        name = VLLM_METRICS[key]
        lines += [f"# TYPE {name.removesuffix('_total')} counter", f"{name}{{{labels}}} {values[key]}"]
    if "external_prefix_cache_queries_total" in values:  # a CPU tier: its connector's counters, as vLLM 0.32's
        for key in ("external_prefix_cache_queries_total", "external_prefix_cache_hits_total"):
            name = VLLM_METRICS[key]
            lines += [f"# TYPE {name.removesuffix('_total')} counter", f"{name}{{{labels}}} {values[key]}"]
        lines.append("# TYPE vllm:prompt_tokens_cached_by_source counter")
        for source in ("device", "host"):
            lines.append(
                f'vllm:prompt_tokens_cached_by_source_total{{{labels},source="{source}"}} '
                f"{values[f'prompt_tokens_cached_by_source_total_{source}']}"
            )
    mm = mm_cache or MediaCache(0)
    for name, value in zip(MM_CACHE, (mm.queries, mm.hits)):
        lines += [f"# TYPE {name} counter", f"{name}_total{{{labels}}} {float(value)}"]
    c = scheduler.counters
    lines.append("# TYPE vllm:request_success counter")
    for reason, count in sorted(c.finished.items()):
        lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {float(count)}')
    hist = "vllm:time_to_first_token_seconds"
    lines.append(f"# TYPE {hist} histogram")
    cumulative = 0
    for bound, count in zip((*TTFT_BUCKETS_S, float("inf")), c.ttft_bucket_counts):
        cumulative += count
        le = "+Inf" if bound == float("inf") else repr(bound)
        lines.append(f'{hist}_bucket{{{labels},le="{le}"}} {float(cumulative)}')
    lines += [f"{hist}_count{{{labels}}} {float(c.ttft_count)}", f"{hist}_sum{{{labels}}} {c.ttft_sum_s}"]
    return "\n".join(lines) + "\n"
