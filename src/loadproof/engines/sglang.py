"""The SGLang adapter: launch rendering and metric names, where the mapping from a profile is clean.

Fields SGLang cannot express are returned as notes (and refuse a launch), never dropped silently.
Metric names are SGLang's documented ones (docs/references/production_metrics.md); they have not yet
been read off a running SGLang by loadproof, so the capacity criteria that need vLLM's preemption and
prefix-cache counters are not available on SGLang.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines.base import EngineDefaults, LaunchCommand, NodeCommand, StartupReport, flag_value

SGLANG_METRICS: dict[str, str] = {
    "num_requests_running": "sglang:num_running_reqs",
    "num_requests_waiting": "sglang:num_queue_reqs",
    "kv_cache_usage_perc": "sglang:token_usage",
    "prompt_tokens_total": "sglang:prompt_tokens_total",
    "generation_tokens_total": "sglang:generation_tokens_total",
    # speculative decoding: gauges of the scheduler's last logging interval, not counters (metrics.spec_decode)
    "spec_accept_length": "sglang:spec_accept_length",
    "spec_accept_rate": "sglang:spec_accept_rate",
}
_KV_TOKENS = re.compile(r"KV Cache is allocated\. #tokens: ([\d,]+)")
_SPEC_METHODS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "ngram": "NGRAM", "draft_model": "STANDALONE"}


@dataclass(frozen=True)
class SGLangEngine(EngineDefaults):
    name: str = "sglang"
    default_block_size: int = 1
    default_max_num_batched_tokens: int = 8192
    health_path: str = "/health"
    tokenize_path: str = "/tokenize"
    metric_names: dict[str, str] = field(default_factory=lambda: dict(SGLANG_METRICS))
    needs_gpus: bool = True

    def api_key(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
        return flag_value(argv, "--api-key")

    def thinking_body(self, enable: bool | None, effort: str | None) -> dict[str, Any]:
        """vLLM's fields, and `separate_reasoning` (the reasoning streamed apart, as `reasoning_content`)."""
        return {**super().thinking_body(enable, effort), "separate_reasoning": True}

    def launch_command(
        self, profile: Profile, python: str, model_path: str, port: int, node_rank: int = 0
    ) -> LaunchCommand:
        model, serving, par, kv, sched = (
            profile.model,
            profile.serving,
            profile.parallel,
            profile.kv_cache,
            profile.scheduler,
        )
        argv = [
            python,
            "-m",
            "sglang.launch_server",
            "--model-path",
            model_path,
            "--served-model-name",
            model.served_name,
            "--context-length",
            str(model.max_model_len),
            "--dtype",
            model.dtype,
            "--host",
            serving.host,
            "--port",
            str(port),
        ]
        notes: list[str] = []
        for flag, value in (
            ("--tokenizer-path", model.tokenizer),
            ("--quantization", model.quantization),
            ("--revision", model.revision),
            ("--load-format", model.load_format),
        ):
            if value:
                argv += [flag, value]
        if par.tensor > 1:
            argv += ["--tp-size", str(par.tensor)]
        if par.pipeline > 1:
            argv += ["--pp-size", str(par.pipeline)]
        if par.layer_split:
            notes.append(f"unsupported: SGLang has no uneven pipeline layer split ({par.layer_split})")
        if par.nodes > 1:
            argv += [
                "--nnodes",
                str(par.nodes),
                "--node-rank",
                str(node_rank),
                "--dist-init-addr",
                f"{par.head_address}:50000",
            ]
        if kv.dtype != "auto":
            argv += ["--kv-cache-dtype", "fp8_e4m3" if kv.dtype == "fp8" else kv.dtype]
        if kv.block_size:
            argv += ["--page-size", str(kv.block_size)]
        if kv.memory_utilization is not None:
            argv += ["--mem-fraction-static", str(kv.memory_utilization)]
        if kv.budget_gib_per_gpu is not None:
            notes.append(
                "unsupported: SGLang sizes its KV pool by memory fraction or --max-total-tokens, "
                f"not by GiB ({kv.budget_gib_per_gpu:g} GiB per GPU)"
            )
        if kv.offload_gib is not None:
            notes.append(
                f"unsupported: offload_gib = {kv.offload_gib:g} (vLLM's --kv-offloading-size) has no SGLang "
                "equivalent rendered here (its hierarchical cache is sized differently)"
            )
        if kv.num_blocks_override is not None:
            notes.append("unsupported: SGLang has no block-count override")
        if sched.max_num_seqs is not None:
            argv += ["--max-running-requests", str(sched.max_num_seqs)]
        if sched.max_num_batched_tokens is not None:
            argv += ["--chunked-prefill-size", str(sched.max_num_batched_tokens)]
        if sched.long_prefill_token_threshold is not None or sched.max_num_partial_prefills is not None:
            notes.append(
                "unsupported: long_prefill_token_threshold and max_num_partial_prefills are vLLM's; SGLang "
                "prefills one chunked prompt at a time"
            )
        if serving.enforce_eager:
            argv.append("--disable-cuda-graph")
        if serving.runner == "pooling":
            argv.append("--is-embedding")
        spec = profile.speculative
        if spec is not None:
            algorithm = _SPEC_METHODS.get(spec.method)
            if algorithm is None:
                notes.append(f"unsupported: speculative method {spec.method!r} has no SGLang equivalent")
            else:
                argv += [
                    "--speculative-algorithm",
                    algorithm,
                    "--speculative-num-steps",
                    str(spec.draft_tokens),
                    "--speculative-eagle-topk",
                    "1",
                    "--speculative-num-draft-tokens",
                    str(spec.draft_tokens + 1),
                ]
                if spec.model:
                    argv += ["--speculative-draft-model-path", spec.model]
            if spec.draft_schedule:
                notes.append(
                    f"unsupported: SGLang takes one draft length; the schedule {spec.draft_schedule} is not applied"
                )
        lora = profile.lora
        if lora is not None:
            argv += [
                "--enable-lora",
                "--lora-paths",
                *[f"{name}={path}" for name, path in lora.adapters.items()],
                "--max-loras-per-batch",
                str(lora.max_loras),
                "--max-lora-rank",
                str(lora.max_lora_rank),
            ]
            if lora.max_cpu_loras is not None:
                notes.append(
                    f"unsupported: max_cpu_loras = {lora.max_cpu_loras} (vLLM's --max-cpu-loras) has no "
                    "SGLang equivalent rendered here"
                )
        if profile.cuda_graphs.capture_sizes:
            argv += ["--cuda-graph-bs", *[str(n) for n in profile.cuda_graphs.capture_sizes]]
        if profile.cuda_graphs.max_capture_size:
            argv += ["--cuda-graph-max-bs", str(profile.cuda_graphs.max_capture_size)]
        if profile.cpu_offload_gib is not None:
            argv += ["--cpu-offload-gb", f"{profile.cpu_offload_gib:g}"]
        argv += serving.extra_args
        return LaunchCommand(argv=argv, env=dict(serving.env), notes=tuple(notes))

    def cluster_commands(self, profile: Profile, python: str, model_path: str, port: int) -> list[NodeCommand]:
        """SGLang needs no Ray: the same server on every node, each with its rank."""
        steps = []
        for rank in range(profile.parallel.nodes):
            command = self.launch_command(profile, python, model_path, port, node_rank=rank)
            steps.append(NodeCommand("head" if rank == 0 else f"worker-{rank}", command.argv, command.env))
        return steps

    def parse_startup_report(self, log_text: str) -> StartupReport | None:
        match = _KV_TOKENS.search(log_text)
        if match is None:
            return None
        return StartupReport(kv_cache_tokens=int(match.group(1).replace(",", "")), line=match.group(0))


SGLANG = SGLangEngine()
