"""The router in front of a fleet's replicas, as a child process: its executable, its command line, and what its
supervision asks of it (`ROUTER_KIND`). Not a router of loadproof's own: vllm-router (PyPI, `pip install
'loadproof[router]'`) or SGLang's sglang-router, each launched as its user would.

Both take the same flags for what loadproof sets: `--host --port --worker-urls URL... --policy P --prometheus-host
--prometheus-port` and, for cache_aware, `--cache-threshold --balance-abs-threshold --balance-rel-threshold`. At
start, each waits for every worker to answer its health check before it listens (`--worker-startup-timeout-secs`,
looked at every `--worker-startup-check-interval` seconds: 1 here, not its 30), so a router that listens has its
workers. Its own counters (requests per worker, its policy's decisions) are on the Prometheus port only: the
main port's /metrics is forwarded to a worker.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadproof.engines.base import StartupReport
from loadproof.errors import UsageError
from loadproof.routing import check_policy

ROUTER_EXTRA = "pip install 'loadproof[router]'"  # pyproject.toml's extra: vllm-router, pinned
STARTUP_CHECK_S = 1  # how often a starting router looks at its workers again (its own default: 30 s)
STARTUP_TIMEOUT_S = 600.0  # how long a router waits for its workers at start (vllm-router's default)


@dataclass(frozen=True)
class RouterTool:
    executable: str  # the console script
    subcommand: tuple[str, ...]  # before the flags
    install: str  # what installs it
    renders_on_workers: bool  # its cache_aware renders prompts on the workers: they start with scale_out_args


ROUTER_TOOLS: dict[str, RouterTool] = {
    "vllm-router": RouterTool("vllm-router", (), ROUTER_EXTRA, True),
    "sglang-router": RouterTool("sglang-router", ("launch",), "pip install sglang-router", False),
}


@dataclass(frozen=True)
class RouterKind:
    """The router as engines/process.py supervises a child: readiness on its /health (200 once it listens, its
    workers healthy at start) and /v1/models (forwarded to a worker, with the workers' key where they demand one);
    no startup report, no metrics of an engine's on its main port."""

    worker_key: str | None = None  # the key the replicas demand on /v1 (the router passes the client's on)
    health_path: str = "/health"
    metric_names: dict[str, str] = field(default_factory=dict)

    def api_key(self, argv: Sequence[str], env: Mapping[str, str]) -> str | None:
        return self.worker_key

    def parse_startup_report(self, log_text: str) -> StartupReport | None:
        return None


ROUTER_KIND = RouterKind()


def router_executable(router: str, python: str | None = None, which: Callable[[str], str | None] = shutil.which) -> str:
    """The router's console script: beside the running Python (the environment loadproof is installed in), else
    on PATH; neither is one UsageError line saying what installs it."""
    tool = ROUTER_TOOLS[router]
    beside = Path(python or sys.executable).parent / tool.executable
    if beside.is_file():
        return str(beside)
    found = which(tool.executable)
    if found:
        return found
    raise UsageError(
        f"{router} is not installed (no {tool.executable} beside {python or sys.executable} or on PATH): {tool.install}"
    )


@dataclass(frozen=True)
class RouterSettings:
    """What the router is started with besides its workers and its ports."""

    router: str = "vllm-router"
    policy: str = "round_robin"
    cache_threshold: float | None = None
    balance_abs_threshold: int | None = None
    balance_rel_threshold: float | None = None
    extra_args: tuple[str, ...] = ()
    startup_timeout_s: float = STARTUP_TIMEOUT_S

    def __post_init__(self) -> None:
        try:
            check_policy(self.router, self.policy)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def router_argv(
    executable: str, settings: RouterSettings, worker_urls: Sequence[str], host: str, port: int, prometheus_port: int
) -> list[str]:
    """The router's command line: its workers, its listening and metrics addresses, its policy and thresholds."""
    tool = ROUTER_TOOLS[settings.router]
    argv = [executable, *tool.subcommand, "--host", host, "--port", str(port), "--worker-urls", *worker_urls]
    argv += ["--policy", settings.policy, "--prometheus-host", host, "--prometheus-port", str(prometheus_port)]
    for flag, value in (
        ("--cache-threshold", settings.cache_threshold),
        ("--balance-abs-threshold", settings.balance_abs_threshold),
        ("--balance-rel-threshold", settings.balance_rel_threshold),
    ):
        if value is not None:
            argv += [flag, f"{value:g}"]
    argv += ["--worker-startup-timeout-secs", str(math.ceil(settings.startup_timeout_s))]
    argv += ["--worker-startup-check-interval", str(STARTUP_CHECK_S)]
    return argv + list(settings.extra_args)
