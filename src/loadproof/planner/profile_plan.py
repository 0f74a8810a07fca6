"""`loadproof plan PROFILE`: the KV capacity a profile should have, beside what the engine reported.

Everything here is theory until a capacity scenario has measured it, and is labelled so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from loadproof.config.profile import Profile
from loadproof.engines import engines
from loadproof.engines.base import StartupReport
from loadproof.errors import ConfigError, UsageError
from loadproof.planner.kv import GIB, Deployment, KVPlan, ModelShape, plan_kv


@dataclass
class ProfilePlan:
    plan: KVPlan
    deployment: Deployment
    budget_source: str
    reported: StartupReport | None

    @property
    def error_pct(self) -> float | None:
        if self.reported is None or not self.reported.kv_cache_tokens:
            return None
        return (self.plan.kv_cache_tokens - self.reported.kv_cache_tokens) / self.reported.kv_cache_tokens * 100


def model_config_path(profile: Profile, override: Path | None = None) -> Path:
    from loadproof.engines.embedded import model_path_for

    if override is not None:
        path = override / "config.json" if override.is_dir() else override
    else:
        path = Path(model_path_for(profile)) / "config.json"
        if profile.model.path.startswith("embedded:") and not path.is_file():
            raise UsageError("the embedded model is not prepared yet: run `loadproof serve --embedded` or "
                             "`loadproof demo` once, or pass --model-config")
    if not path.is_file():
        raise UsageError(f"no model config at {path}; pass --model-config PATH (a config.json or its folder)")
    return path


def plan_profile(profile: Profile, config_path: Path, startup_log: str | None = None) -> ProfilePlan:
    engine = engines.get(profile.engine)
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{config_path} is not valid JSON: {exc}") from None
    shape = ModelShape.from_config(config)
    reported = engine.parse_startup_report(startup_log) if startup_log is not None else None
    if startup_log is not None and reported is None:
        raise UsageError("the startup log holds no KV cache report")
    kv = profile.kv_cache
    if reported is not None and reported.kv_memory_gib is not None:
        budget, source = reported.kv_memory_gib * GIB, f"engine startup log: {reported.kv_memory_gib:g} GiB available"
    elif kv.budget_gib_per_gpu is not None:
        budget, source = kv.budget_gib_per_gpu * GIB, f"profile: {kv.budget_gib_per_gpu:g} GiB per GPU"
    elif profile.engine == "embedded" and "VLLM_CPU_KVCACHE_SPACE" in profile.serving.env:
        gib = float(profile.serving.env["VLLM_CPU_KVCACHE_SPACE"])
        budget, source = gib * GIB, f"VLLM_CPU_KVCACHE_SPACE={gib:g} GiB"
    elif kv.num_blocks_override is None:
        raise UsageError("the profile names no KV budget (kv_cache.budget_gib_per_gpu): give the engine's "
                         "startup log with --startup-log to plan from the memory it found")
    else:
        budget, source = 0, "num_blocks_override"
    if kv.num_blocks_override is not None:
        source = f"num_blocks_override={kv.num_blocks_override}"
    dep = Deployment(
        tensor_parallel=profile.parallel.tensor,
        pipeline_parallel=profile.parallel.pipeline,
        layer_split=tuple(profile.parallel.layer_split) if profile.parallel.layer_split else None,
        kv_cache_dtype=kv.dtype,
        block_size=kv.block_size or engine.default_block_size,
        max_model_len=profile.model.max_model_len,
        max_num_batched_tokens=profile.scheduler.max_num_batched_tokens or engine.default_max_num_batched_tokens,
        kv_bytes_per_gpu=int(budget),
        num_blocks_override=kv.num_blocks_override,
    )
    return ProfilePlan(plan_kv(shape, dep), dep, source, reported)
