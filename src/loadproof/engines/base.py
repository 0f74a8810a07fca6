"""The Engine protocol: what loadproof must know about an inference engine to drive and verify it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

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
    """The engine's command line and environment; `notes` say what the engine cannot express."""

    argv: list[str]
    env: dict[str, str]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeCommand:
    """One step of a multi-node launch, to run on the named host."""

    node: str
    argv: list[str]
    env: dict[str, str]


class Engine(Protocol):
    name: str
    default_block_size: int
    default_max_num_batched_tokens: int
    health_path: str
    tokenize_path: str
    metric_names: dict[str, str]
    needs_gpus: bool  # False: the supervisor does not count GPUs before a start (CPU build, simulator)

    def api_key(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
        """The key the engine started with this command line and environment demands on /v1, if any."""
        ...

    def launch_command(self, profile: Profile, python: str, model_path: str, port: int) -> LaunchCommand: ...

    def cluster_commands(self, profile: Profile, python: str, model_path: str, port: int) -> list[NodeCommand]: ...

    def parse_startup_report(self, log_text: str) -> StartupReport | None: ...


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of `--flag VALUE` or `--flag=VALUE` (the last one given, as argparse takes it)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1:]
    return value
