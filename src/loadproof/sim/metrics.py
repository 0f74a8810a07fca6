"""The simulator's /metrics in vLLM's Prometheus names, labels `model_name` and `engine` as vLLM sets them."""

from __future__ import annotations

from loadproof.engines.vllm import VLLM_METRICS
from loadproof.sim.scheduler import TTFT_BUCKETS_S, Scheduler

_GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")
_COUNTERS = (
    "num_preemptions_total",
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "prompt_tokens_total",
    "generation_tokens_total",
)


def render_metrics(model: str, scheduler: Scheduler) -> str:
    labels = f'engine="0",model_name="{model}"'
    values = scheduler.gauges()
    lines: list[str] = []
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
