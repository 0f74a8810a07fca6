"""vLLM's /metrics names, a wire format: the engine adapters read them (`engines.vllm`, `engines.sim`) and the
simulator serves them (`sim.metrics`), so neither has to import the other."""

from __future__ import annotations

# loadproof's metric vocabulary -> vLLM's Prometheus names (as vLLM 0.26-0.32 expose them)
VLLM_METRICS: dict[str, str] = {
    "num_requests_running": "vllm:num_requests_running",
    "num_requests_waiting": "vllm:num_requests_waiting",
    "num_preemptions_total": "vllm:num_preemptions_total",
    "prefix_cache_queries_total": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits_total": "vllm:prefix_cache_hits_total",
    "kv_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "prompt_tokens_total": "vllm:prompt_tokens_total",
    "generation_tokens_total": "vllm:generation_tokens_total",
    # histogram and counter series for cross-checking the client's figures (metrics/engine_agreement.py)
    "ttft_seconds_sum": "vllm:time_to_first_token_seconds_sum",
    "ttft_seconds_count": "vllm:time_to_first_token_seconds_count",
    "request_success_total": "vllm:request_success_total",
    # present only when speculative decoding is on
    "spec_decode_num_draft_tokens_total": "vllm:spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens_total": "vllm:spec_decode_num_accepted_tokens_total",
    "spec_decode_num_drafts_total": "vllm:spec_decode_num_drafts_total",
    # accepted draft tokens by draft position, one value per `position` label (telemetry.server_metrics)
    "spec_decode_num_accepted_tokens_per_pos_total": "vllm:spec_decode_num_accepted_tokens_per_pos_total{position}",
    # a KV connector's tier (the CPU tier of --kv-offloading-size, LMCache, another instance): tokens its
    # prefix cache was asked for and had (metrics/offload.py), and, from vLLM 0.32, cached prompt tokens by the
    # tier that supplied them, one value per `source` label (device, host, disk, p2p, external_unspecified)
    "external_prefix_cache_queries_total": "vllm:external_prefix_cache_queries_total",
    "external_prefix_cache_hits_total": "vllm:external_prefix_cache_hits_total",
    "prompt_tokens_cached_by_source_total": "vllm:prompt_tokens_cached_by_source_total{source}",
    # with LoRA: the adapters of the running batch and of the queue, as names listed in the labels of the latest
    # series of an info gauge whose value is the time it was set (telemetry.server_metrics, `metric[label]`)
    # the multimodal preprocessor cache: items (images, audio, videos) looked up and found (metrics/media.py)
    "mm_cache_queries_total": "vllm:mm_cache_queries_total",
    "mm_cache_hits_total": "vllm:mm_cache_hits_total",
    "lora_running_adapters": "vllm:lora_requests_info[running_lora_adapters]",
    # vLLM 0.32: the queue by why it waits, one value per `reason` label: capacity (the batch, the KV cache), or
    # deferred (a LoRA slot, a KV transfer, a grammar being compiled)
    "num_requests_waiting_by_reason": "vllm:num_requests_waiting_by_reason{reason}",
    "lora_waiting_adapters": "vllm:lora_requests_info[waiting_lora_adapters]",
}
