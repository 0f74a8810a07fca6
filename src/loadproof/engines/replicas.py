"""A fleet's members (`[replicas]`): each replica as a plain profile the engine launches, the router's settings, and
whether the host can hold them all.

Each replica runs the profile's engine and model on a port of its own (`replicas.ports`, else a free one) under its
own name (`NAME-replica-N`, N from 1); behind vllm-router it also starts with the engine's `scale_out_args`
(vLLM's `--enable-scale-out`, which only opens the render endpoints vllm-router's cache_aware policy asks the
replicas for), whatever the policy, so the policy can change without restarting a replica.

The memory check adds, per replica, what it holds in host memory: its KV cache where the engine keeps it there
(the CPU build's `VLLM_CPU_KVCACHE_SPACE`), a CPU tier (`offload_gib`), offloaded weights, the weights themselves
where the engine runs on CPU, and the engine's measured runtime (`host_runtime_gib`); the fleet is `count` times
that, against what the host has available.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadproof.config.profile import Profile
from loadproof.config.replicas import ReplicasSpec
from loadproof.engines import engines
from loadproof.engines.router import ROUTER_TOOLS, RouterSettings
from loadproof.errors import UsageError
from loadproof.routing import check_policy

GIB = 1024**3
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def fleet_of(profile: Profile) -> ReplicasSpec:
    if profile.replicas is None:
        raise ValueError(f"profile {profile.name} has no [replicas]")
    return profile.replicas


def replica_profile(profile: Profile, index: int) -> Profile:
    """Replica `index` (from 1) of `profile`'s fleet, as a plain profile: its port, its name, its GPUs, and the
    arguments its router asks of the engine; no `[replicas]` of its own."""
    spec = fleet_of(profile)
    if not 1 <= index <= spec.count:
        raise ValueError(f"replica {index} of {spec.count}")
    engine = engines.get(profile.engine)
    args = [a for a in engine.scale_out_args if a not in profile.serving.extra_args]
    if not ROUTER_TOOLS[spec.router].renders_on_workers:
        args = []
    env = dict(profile.serving.env)
    if spec.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = spec.gpus[index - 1]
    serving = profile.serving.model_copy(
        update={
            "port": spec.ports[index - 1] if spec.ports else None,  # the profile's own port is the router's
            "extra_args": [*profile.serving.extra_args, *args],
            "env": env,
        }
    )
    return profile.model_copy(update={"name": f"{profile.name}-replica-{index}", "replicas": None, "serving": serving})


def replica_profiles(profile: Profile) -> list[Profile]:
    return [replica_profile(profile, i) for i in range(1, fleet_of(profile).count + 1)]


def router_settings(profile: Profile) -> RouterSettings:
    """The router's settings from `[replicas]`; it waits at start as long as a replica may take to be ready."""
    spec = fleet_of(profile)
    return RouterSettings(
        router=spec.router,
        policy=spec.policy,
        cache_threshold=spec.cache_threshold,
        balance_abs_threshold=spec.balance_abs_threshold,
        balance_rel_threshold=spec.balance_rel_threshold,
        extra_args=tuple(spec.router_args),
        startup_timeout_s=profile.serving.ready_timeout_s,
    )


def with_router_policy(profile: Profile, policy: str | None) -> Profile:
    """`profile` with its router's policy replaced (`serve --router-policy`); a policy the router does not have,
    or a profile without `[replicas]`, is one UsageError line."""
    if policy is None:
        return profile
    if profile.replicas is None:
        raise UsageError(f"--router-policy is for a profile with [replicas]; {profile.name} has none")
    try:
        check_policy(profile.replicas.router, policy)
    except ValueError as exc:
        raise UsageError(f"--router-policy: {exc}") from None
    return profile.model_copy(update={"replicas": profile.replicas.model_copy(update={"policy": policy})})


# -- memory ----------------------------------------------------------------------------------------------------


def weights_bytes(model_path: str) -> int | None:
    """The size of a local model folder's weight files; None where the path is not a local folder (a hub id)."""
    folder = Path(model_path)
    if not folder.is_dir():
        return None
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))


@dataclass(frozen=True)
class ReplicaMemory:
    """What one replica holds in host memory, GiB, by part; a part None is not known (not counted)."""

    kv_gib: float
    weights_gib: float | None
    runtime_gib: float | None

    @property
    def total_gib(self) -> float:
        return self.kv_gib + (self.weights_gib or 0.0) + (self.runtime_gib or 0.0)

    def parts(self) -> str:
        named = [f"{self.kv_gib:.1f} KV"] if self.kv_gib else []
        for value, what in ((self.weights_gib, "weights"), (self.runtime_gib, "runtime")):
            named.append(f"{value:.1f} {what}" if value is not None else f"{what} not counted")
        return " + ".join(named)


def replica_memory(profile: Profile, weights: int | None) -> ReplicaMemory:
    """One replica of `profile` in host memory: KV where the engine keeps it in host memory (its budget outside
    `kv_cache`, the CPU build's), a CPU tier and offloaded weights, the weights (`weights` bytes) where the engine
    runs without GPUs, and the engine's measured runtime."""
    engine = engines.get(profile.engine)
    budget = engine.kv_budget_gib(profile)
    kv = (budget[0] if budget else 0.0) + (profile.kv_cache.offload_gib or 0.0)
    kv += (profile.cpu_offload_gib or 0.0) * profile.parallel.gpus
    on_host = not engine.needs_gpus
    weights_gib = (weights / GIB if weights is not None else None) if on_host else 0.0
    return ReplicaMemory(kv_gib=kv, weights_gib=weights_gib, runtime_gib=engine.host_runtime_gib)


def check_fleet_memory(count: int, each: ReplicaMemory, available_bytes: int | None, total_bytes: int | None) -> None:
    """One UsageError line where `count` replicas of `each` need more than the host has available: the count, the
    estimate and what the host has. A host that does not say (no /proc/meminfo) is not checked."""
    if available_bytes is None:
        return
    need = count * each.total_gib
    have = available_bytes / GIB
    if need > have:
        of = f" of {total_bytes / GIB:.1f} GiB" if total_bytes else ""
        raise UsageError(
            f"[replicas] count = {count}: this host cannot hold them: about {count} x {each.total_gib:.1f} GiB "
            f"({each.parts()}) = {need:.1f} GiB, and it has {have:.1f} GiB available{of}; lower the count or "
            "each replica's KV cache"
        )
