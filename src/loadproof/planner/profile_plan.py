"""`loadproof plan PROFILE`: the KV capacity a profile should have, beside what the engine reported.

Everything here is theory until a capacity scenario has measured it, and is labelled so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines import engines
from loadproof.engines.base import StartupReport
from loadproof.engines.embedded import model_path_for
from loadproof.errors import ConfigError, UsageError
from loadproof.planner.kv import GIB, Deployment, KVPlan, ModelShape, plan_kv


@dataclass
class ProfilePlan:
    plan: KVPlan
    deployment: Deployment
    budget_source: str
    reported: StartupReport | None
    scheduling: str = ""
    block_source: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def error_pct(self) -> float | None:
        if self.reported is None or not self.reported.kv_cache_tokens:
            return None
        return (self.plan.kv_cache_tokens - self.reported.kv_cache_tokens) / self.reported.kv_cache_tokens * 100


def model_config_path(profile: Profile, override: Path | None = None) -> Path:
    if override is not None:
        path = override / "config.json" if override.is_dir() else override
    else:
        path = Path(model_path_for(profile)) / "config.json"
        if profile.model.path.startswith("embedded:") and not path.is_file():
            raise UsageError(
                "the embedded model is not prepared yet: run `loadproof serve --embedded` or "
                "`loadproof demo` once, or pass --model-config"
            )
    if not path.is_file():
        raise UsageError(f"no model config at {path}; pass --model-config PATH (a config.json or its folder)")
    return path


def concurrent_batches(profile: Profile, config: dict[str, Any]) -> tuple[int, str]:
    """Batches the engine keeps in flight at once (vLLM's `max_concurrent_batches`), and why: the engine
    adapter's answer for this profile and model config.

    It sets how many tokens a sliding-window layer reserves per request (window - 1 + batches x
    max_num_batched_tokens), so it is where CPU and GPU vLLM differ for hybrid models.
    """
    return engines.get(profile.engine).concurrent_batches(profile, config)


def position_limit(config: dict[str, Any]) -> int | None:
    """The longest window the model's positions cover, derived as vLLM derives it (`max_position_embeddings`,
    times the RoPE scaling factor except for llama3/longrope; YaRN scales its original length)."""
    text = config.get("text_config") or config
    limit = text.get("max_position_embeddings")
    scaling = text.get("rope_scaling") or {}
    kind = scaling.get("rope_type") or scaling.get("type")
    if scaling.get("factor") and kind not in (None, "su", "longrope", "llama3", "default"):
        base = scaling.get("original_max_position_embeddings") if kind == "yarn" else limit
        if base:
            limit = int(base * float(scaling["factor"]))
    return int(limit) if limit else None


def block_size(profile: Profile, shape: ModelShape) -> tuple[int, str]:
    """The KV block size the engine will use, and why: the profile's, else what the engine picks for the
    model's attention (vLLM on a GPU: 64 for MLA, where FlashMLA sets it)."""
    if profile.kv_cache.block_size:
        return profile.kv_cache.block_size, "profile"
    return engines.get(profile.engine).attention_block_size(shape.mla_dim is not None)


def known_block_size(profile: Profile) -> int | None:
    """The KV block size the engine will use for `profile`, where it is known before the engine starts
    (`block_size`): the profile's, else the engine's pick, which for some engines depends on the model's
    attention (its config.json, read here); None when it does and that config cannot be read (a model this
    host has not downloaded)."""
    if profile.kv_cache.block_size:
        return profile.kv_cache.block_size
    picks = {engines.get(profile.engine).attention_block_size(mla)[0] for mla in (False, True)}
    if len(picks) == 1:  # the same whatever the attention: no config needed
        return picks.pop()
    try:
        shape = ModelShape.from_config(json.loads(model_config_path(profile).read_text(encoding="utf-8")))
    except (UsageError, OSError, ValueError, KeyError, TypeError):  # ConfigError is a UsageError
        return None
    return block_size(profile, shape)[0]


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
    env_budget = engine.kv_budget_gib(profile)
    if reported is not None and reported.kv_memory_gib is not None:
        budget, source = reported.kv_memory_gib * GIB, f"engine startup log: {reported.kv_memory_gib:g} GiB available"
    elif kv.budget_gib_per_gpu is not None:
        budget, source = kv.budget_gib_per_gpu * GIB, f"profile: {kv.budget_gib_per_gpu:g} GiB per GPU"
    elif env_budget is not None:
        budget, source = env_budget[0] * GIB, env_budget[1]
    elif kv.num_blocks_override is None:
        raise UsageError(
            "the profile names no KV budget (kv_cache.budget_gib_per_gpu): give the engine's "
            "startup log with --startup-log to plan from the memory it found"
        )
    else:
        budget, source = 0, "num_blocks_override"
    if kv.num_blocks_override is not None:
        source = f"num_blocks_override={kv.num_blocks_override}"
    batches, scheduling = concurrent_batches(profile, config)
    block, block_source = block_size(profile, shape)
    dep = Deployment(
        tensor_parallel=profile.parallel.tensor,
        pipeline_parallel=profile.parallel.pipeline,
        layer_split=tuple(profile.parallel.layer_split) if profile.parallel.layer_split else None,
        kv_cache_dtype=kv.dtype,
        block_size=block,
        max_model_len=profile.model.max_model_len,
        max_num_batched_tokens=profile.scheduler.max_num_batched_tokens or engine.default_max_num_batched_tokens,
        kv_bytes_per_gpu=int(budget),
        num_blocks_override=kv.num_blocks_override,
        concurrent_batches=batches,
    )
    warnings = []
    limit = position_limit(config)
    if limit is not None and profile.model.max_model_len > limit:
        warnings.append(
            f"max_model_len {profile.model.max_model_len:,} is past the {limit:,} positions the model "
            "config covers: vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, and then a prompt "
            "past that length can crash the engine mid-run (a device-side assert)"
        )
    return ProfilePlan(plan_kv(shape, dep), dep, source, reported, scheduling, block_source, tuple(warnings))
