"""What every way `loadproof serve` runs engines shares (supervisor/serving.py: one engine or a prefill/decode pair;
supervisor/fleet.py: replicas behind a router): the command's settings, a rendered command, the host-memory check,
the supervisors each in a thread of their own, stopped together on every way out, and the relay in front.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines.process import Status
from loadproof.errors import UsageError
from loadproof.protocol.urls import base_url
from loadproof.relay import Relay, RelayConfig
from loadproof.relay.prefill import PrefillConfig
from loadproof.relay.serve import UPSTREAM_KEY_ENV, RelayServer, configure_logging, load_keys
from loadproof.telemetry.host import host_memory_bytes

RELAY_DRAIN_S = 5.0  # after Ctrl-C, how long the relay lets streams in flight end before it cancels them

Say = Callable[[str], None]
Phase = Callable[[str | None], AbstractContextManager[Status]]  # a status line that may stay silent


@dataclass(frozen=True)
class ServeOptions:
    max_restarts: int = 3  # restarts allowed within the restart window, then FAILED
    probe_interval_s: float = 10.0
    probe_timeout_s: float = 60.0
    backoff_s: float = 5.0  # first restart delay; doubles, capped
    relay_port: int | None = None  # None: no relay in front
    out: Path = Path("runs")  # where the supervisor's events.jsonl goes (a folder of its own)

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.probe_interval_s <= 0 or self.probe_timeout_s <= 0 or self.backoff_s <= 0:
            raise UsageError(
                "--max-restarts must be >= 0; --probe-interval-s, --probe-timeout-s and --backoff-s must be > 0"
            )


@dataclass(frozen=True)
class RenderedStep:
    node: str | None  # the host it runs on, for a profile over several nodes (or the member of a pair or fleet)
    argv: list[str]
    env: dict[str, str]


def check_host_memory(profile: Profile, total_bytes: int | None = None) -> None:
    """A CPU tier larger than this host's memory is one line before anything starts."""
    offload = profile.kv_cache.offload_gib
    total = host_memory_bytes() if total_bytes is None else total_bytes
    if offload is not None and total is not None and offload * 1024**3 > total:
        raise UsageError(
            f"[kv_cache] offload_gib = {offload:g} is more than this host's memory "
            f"({total / 1024**3:.1f} GiB): the CPU tier lives in host memory"
        )


def relay_remedy(options: ServeOptions) -> str:
    """What to do when the relay's port is taken: another `--relay-port`, or for a pair (whose relay takes the
    profile's port) another `--port`."""
    return "pass --relay-port" if options.relay_port is not None else "pass --port"


def supervise_all(
    supervisors: list[Any],
    say: Say,
    while_running: Callable[[], None] | None = None,
    on_end: Callable[[], None] | None = None,
    stopping: str | None = None,
) -> str:
    """Each `supervisor.run()` in a thread of its own (then `on_end()` there, once one has ended),
    `while_running()` (or a wait) in this one; one supervisor that ends (FAILED) ends them all. However this
    thread leaves (a supervisor ended, Ctrl-C, SIGTERM, an error), every supervisor is stopped and waited
    for, so no engine's process group is left when `serve` exits."""
    outcome: dict[str, Any] = {}
    # waited on instead of Thread.join: on Python 3.11 a join interrupted by Ctrl-C can leave the thread
    # looking ended while it runs on (CPython #90882), and `serve` would exit with the engine still up
    dones = [threading.Event() for _ in supervisors]
    one_ended = threading.Event()

    def supervise(supervisor: Any, done: threading.Event) -> None:
        try:
            outcome.setdefault("state", supervisor.run())
        except BaseException as exc:  # handed to the main thread, which reports it
            outcome.setdefault("error", exc)
        finally:
            done.set()
            if not one_ended.is_set():
                one_ended.set()
                if on_end is not None:
                    on_end()

    threads = [
        threading.Thread(target=supervise, args=(sup, done), name="loadproof-supervisor", daemon=True)
        for sup, done in zip(supervisors, dones)
    ]
    try:
        for thread in threads:
            thread.start()
        if while_running is not None:
            while_running()
        while not one_ended.wait(0.5):
            pass
    except BaseException:
        say(stopping or "stopping the engine" + ("s" if len(supervisors) > 1 else ""))
        raise
    finally:
        for sup in supervisors:  # all asked at once: each engine's stop overlaps the others'
            sup.stop()
        for sup, done in zip(supervisors, dones):
            stop_and_join(sup, done)
    if "error" in outcome:
        raise outcome["error"]
    return str(outcome.get("state", "stopped"))


def stop_and_join(supervisor: Any, done: threading.Event) -> None:
    """Stop the supervisor and wait `stop_within_s` for its run to end (`done`); a second Ctrl-C does not cut
    the wait short (the engine is being stopped already). Past the bound, SIGKILL the engine's group rather
    than leave it."""
    supervisor.stop()
    deadline = time.monotonic() + supervisor.stop_within_s
    while not done.is_set() and time.monotonic() < deadline:
        try:
            done.wait(min(0.5, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt:
            continue
    if not done.is_set():
        supervisor.kill_engine()


def serve_with_relay(
    supervisors: list[Any],
    relay_state: dict[str, Any],
    upstream: str,
    prefill: PrefillConfig | None,
    at: tuple[int, str],
    engine_key: str | None,
    say: Say,
    result: Say,
    stopping: str | None = None,
) -> str:
    """The supervisors in threads, the relay in front (503 while an engine is not ready). Ctrl-C or SIGTERM
    stops the engines at once (streams in flight end with an in-band error) and the relay within
    RELAY_DRAIN_S; then `serve` exits 130, as without the relay. `at`: the relay's port, and what to do when
    another process holds it."""
    configure_logging()
    relay = Relay(
        RelayConfig(
            upstream=upstream,
            api_keys=load_keys(None),
            upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV) or engine_key,
            prefill=prefill,
        )
    )
    relay.paused_reason = "engine starting"
    relay_state["relay"] = relay

    class StopsTheEngineToo(RelayServer):
        def handle_exit(self, sig: int, frame: Any) -> None:  # the relay's signal handler, in the main thread
            for supervisor in supervisors:
                supervisor.stop()
            super().handle_exit(sig, frame)

    # a stream never holds `serve` up for long
    relay_port, remedy = at

    def listening() -> None:  # said once the relay's socket listens, not before
        result(
            f"relay listening on {base_url('127.0.0.1', relay_port)}"
            + (f" (prefill on {prefill.upstream}, then decode on {upstream})" if prefill is not None else "")
        )

    http = StopsTheEngineToo(relay, "127.0.0.1", relay_port, drain_s=RELAY_DRAIN_S, on_ready=listening, remedy=remedy)

    def relay_in_this_thread() -> None:
        http.run()  # returns when the supervisor ended, or re-raises Ctrl-C / SIGTERM once it drained

    def end_relay() -> None:
        http.should_exit = True

    return supervise_all(supervisors, say, relay_in_this_thread, end_relay, stopping)
