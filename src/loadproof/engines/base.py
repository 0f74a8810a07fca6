"""The Engine protocol: what loadproof must know about an inference engine to drive and verify it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from loadproof.config.profile import Profile


@dataclass(frozen=True)
class StartupReport:
    """The capacity the engine itself reported at start-up (never computed by loadproof)."""

    kv_cache_tokens: int | None = None
    kv_memory_gib: float | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens: int | None = None
    line: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "kv_cache_tokens": self.kv_cache_tokens,
            "kv_memory_gib": self.kv_memory_gib,
            "max_concurrency": self.max_concurrency,
            "max_concurrency_tokens_per_request": self.max_concurrency_tokens,
            "line": self.line,
        }


@dataclass(frozen=True)
class LaunchCommand:
    """The engine's command line and environment; `notes` say what the engine cannot express, each one a
    reason to refuse the launch (`serve --dry-run` prints them)."""

    argv: list[str]
    env: dict[str, str]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeCommand:
    """One step of a multi-node launch, to run on the named host."""

    node: str
    argv: list[str]
    env: dict[str, str]


class ProcessKind(Protocol):
    """What a child process's supervision asks of its kind (engines/process.py): an engine, or a router."""

    @property
    def health_path(self) -> str: ...

    @property
    def metric_names(self) -> dict[str, str]:
        """The engine's names of the figures its /metrics serves (none: a router's)."""
        ...

    def api_key(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None: ...

    def parse_startup_report(self, log_text: str) -> StartupReport | None: ...


class Engine(Protocol):
    """An engine kind. Whatever differs between kinds is asked of the adapter, never decided by its name
    (registry.py: nothing outside a registry branches on a plug-in's kind)."""

    name: str
    default_block_size: int
    default_max_num_batched_tokens: int
    health_path: str
    tokenize_path: str
    metric_names: dict[str, str]
    needs_gpus: bool  # False: the supervisor does not count GPUs before a start (CPU build, simulator)
    kv_transfer: bool  # True: it runs a disaggregated pair's instances (vLLM's --kv-transfer-config)
    # arguments a replica behind vllm-router starts with, so its cache_aware policy can render prompts on it
    scale_out_args: tuple[str, ...]
    # host memory one instance holds besides its KV cache and weights (the runtime, its processes), measured; None:
    # not measured for this engine (engines/replicas.py: what a fleet's memory check counts)
    host_runtime_gib: float | None

    def api_key(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
        """The key the engine started with this command line and environment demands on /v1, if any."""
        ...

    def launch_command(self, profile: Profile, python: str, model_path: str, port: int) -> LaunchCommand: ...

    def cluster_commands(self, profile: Profile, python: str, model_path: str, port: int) -> list[NodeCommand]: ...

    def parse_startup_report(self, log_text: str) -> StartupReport | None: ...

    def interpreter(self, profile: Profile) -> str:
        """The Python the engine runs on (the profile's, or the one loadproof installed it into)."""
        ...

    def prepare(self, status: Callable[[str], None] | None = None, profile: Profile | None = None) -> None:
        """Install or prepare, on this machine, what a launch of `profile` needs and loadproof provides (the
        embedded engine's environment and the model it serves); nothing where the user installed the engine."""
        ...

    def concurrent_batches(self, profile: Profile, config: Mapping[str, Any]) -> tuple[int, str]:
        """Batches the engine keeps in flight at once for this profile and model config, and why."""
        ...

    def attention_block_size(self, mla: bool) -> tuple[int, str]:
        """The KV block size the engine picks when the profile sets none, and why."""
        ...

    def kv_budget_gib(self, profile: Profile) -> tuple[float, str] | None:
        """A KV budget per GPU the profile gives the engine outside `kv_cache` (its environment), and where."""
        ...

    def thinking_body(self, enable: bool | None, effort: str | None) -> dict[str, Any]:
        """The chat request's fields that switch a reasoning model's thinking on or off (`enable`; None: the
        model's default) and set its reasoning effort (None: not sent)."""
        ...


class EngineDefaults:
    """What most engines answer: no installation, the profile's Python, one batch per pipeline stage,
    the default block size, no budget outside `kv_cache`, no disaggregated pair, no scale-out endpoints."""

    name: str
    default_block_size: int
    kv_transfer: bool = False
    scale_out_args: tuple[str, ...] = ()
    host_runtime_gib: float | None = None

    def interpreter(self, profile: Profile) -> str:
        return profile.serving.python

    def prepare(self, status: Callable[[str], None] | None = None, profile: Profile | None = None) -> None:
        return None

    def concurrent_batches(self, profile: Profile, config: Mapping[str, Any]) -> tuple[int, str]:
        return profile.parallel.pipeline, "synchronous scheduling assumed"

    def attention_block_size(self, mla: bool) -> tuple[int, str]:
        return self.default_block_size, f"{self.name} default"

    def kv_budget_gib(self, profile: Profile) -> tuple[float, str] | None:
        return None

    def thinking_body(self, enable: bool | None, effort: str | None) -> dict[str, Any]:
        """vLLM's: the chat template's `enable_thinking`, and a top-level `reasoning_effort`."""
        body: dict[str, Any] = {}
        if enable is not None:
            body["chat_template_kwargs"] = {"enable_thinking": enable}
        if effort is not None:
            body["reasoning_effort"] = effort
        return body


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of `--flag VALUE` or `--flag=VALUE` (the last one given, as argparse takes it)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value
