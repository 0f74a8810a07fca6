"""`loadproof serve`: a profile's engine under the supervisor, optionally behind the relay, until Ctrl-C; a
disaggregated profile's two instances, each under a supervisor of its own, always behind the relay, which
prefills each request on the one and decodes it on the other (relay.prefill).

`ServeOptions` are the command's settings, checked once. `dry_run` renders the exact command(s) a
profile would launch, host by host; `serve` checks that every port it is to listen on is free (the engine's,
each instance's of a pair, the relay's: a port another process holds is one line, exit 2, before anything is
installed or launched), prepares the engine (the embedded one installs itself once), runs the supervisor in a
thread of its own and, with the relay, the relay in this one (503 while the engine is not ready), and leaves
nothing of the engine's process group behind on any way out; Ctrl-C ends it with a line saying what it stopped.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines import embedded, engines
from loadproof.engines.disaggregation import ROLES, role_profile
from loadproof.engines.process import Status, free_port
from loadproof.errors import EnvironmentFailure, Interrupted, UsageError
from loadproof.planner.profile_plan import known_block_size
from loadproof.protocol.ports import check_free
from loadproof.protocol.urls import base_url
from loadproof.relay import Relay, RelayConfig
from loadproof.relay.prefill import PrefillConfig
from loadproof.relay.serve import UPSTREAM_KEY_ENV, RelayServer, configure_logging, load_keys
from loadproof.store.run_dir import new_run_id
from loadproof.supervisor.loop import FAILED, READY, Supervisor
from loadproof.supervisor.policy import SupervisorPolicy
from loadproof.supervisor.probe import prober_for
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
    node: str | None  # the host it runs on, for a profile over several nodes
    argv: list[str]
    env: dict[str, str]


def dry_run(profile: Profile) -> tuple[list[RenderedStep], list[str]]:
    """The exact command(s) `serve` would launch for `profile`, and the engine's notes on what it cannot run."""
    engine = engines.get(profile.engine)
    pd = profile.disaggregation
    if pd is not None:  # the two instances (ports 8001 and 8002 where the profile picks none) and the relay
        steps: list[RenderedStep] = []
        notes: list[str] = []
        urls: list[str] = []
        for i, role in enumerate(ROLES):
            member = role_profile(profile, role)
            port = member.serving.port or 8001 + i
            command = engine.launch_command(member, engine.interpreter(member), embedded.model_path_for(member), port)
            steps.append(RenderedStep(f"the {role} instance", command.argv, command.env))
            notes += command.notes
            urls.append(base_url(member.serving.host, port))
        relay = [
            "loadproof",
            "relay",
            "--upstream",
            urls[1],
            "--prefill-upstream",
            urls[0],
            "--kv-connector",
            pd.connector,
            "--port",
            str(profile.serving.port or 8080),
        ]
        relay += ["--kv-storage", pd.storage_path] if pd.storage_path else []
        block = known_block_size(profile) if pd.storage_path else None  # names the folders ExampleConnector writes
        relay += ["--kv-block-size", str(block)] if block else []
        return [*steps, RenderedStep("this host, the relay (it routes each request to both)", relay, {})], notes
    python, model_path, port = (
        engine.interpreter(profile),
        embedded.model_path_for(profile),
        profile.serving.port or 8000,
    )
    command = engine.launch_command(profile, python, model_path, port)
    if profile.parallel.nodes > 1:
        steps = [
            RenderedStep(step.node, step.argv, step.env)
            for step in engine.cluster_commands(profile, python, model_path, port)
        ]
    else:
        steps = [RenderedStep(None, command.argv, command.env)]
    return steps, list(command.notes)


def check_host_memory(profile: Profile, total_bytes: int | None = None) -> None:
    """A CPU tier larger than this host's memory is one line before anything starts."""
    offload = profile.kv_cache.offload_gib
    total = host_memory_bytes() if total_bytes is None else total_bytes
    if offload is not None and total is not None and offload * 1024**3 > total:
        raise UsageError(
            f"[kv_cache] offload_gib = {offload:g} is more than this host's memory "
            f"({total / 1024**3:.1f} GiB): the CPU tier lives in host memory"
        )


def serve(profile: Profile, options: ServeOptions, say: Say, result: Say, phase: Phase) -> None:
    """Launch and supervise `profile`'s engine (a disaggregated profile: its two instances, behind the relay)
    until Ctrl-C (KeyboardInterrupt) or a supervisor gives up (EnvironmentFailure). Events go to `say`; where
    it serves, to `result`."""
    if profile.parallel.nodes > 1:
        raise UsageError("multi-node profiles are launched host by host: run --dry-run and start each step on its host")
    check_ports(profile, options)
    folder = options.out / new_run_id("serve")
    try:
        _serve_session(profile, folder, options, say, result, phase)
    except KeyboardInterrupt:  # every engine is stopped by now (`_supervise`), and nothing was measured
        stopped = "both engines" if profile.disaggregation else "the engine"
        if relay_port(profile, options) is not None:
            stopped = f"the relay and {stopped}"
        events = f" (supervisor events: {folder})" if folder.exists() else ""
        raise Interrupted(f"interrupted; stopped {stopped}{events}") from None


def relay_port(profile: Profile, options: ServeOptions) -> int | None:
    """The relay's port: `--relay-port` with `--relay`; a pair's, always, the profile's port, else 8080."""
    if options.relay_port is None and profile.disaggregation is not None:
        return profile.serving.port or 8080  # the pair serves through the relay: it routes to both
    return options.relay_port


def check_ports(profile: Profile, options: ServeOptions) -> None:
    """Every port `serve` is to listen on, free, before anything is installed or launched: an engine already on
    one would answer the readiness probe in this one's place. A port taken is PortInUse (exit 2) naming it, a
    port given twice a UsageError."""
    wanted: list[tuple[str, int, str, str]] = []  # host, port, whose, what to do
    if profile.disaggregation is None:
        if profile.serving.port is not None:
            wanted.append((profile.serving.host, profile.serving.port, "the engine", "pass --port"))
    else:
        for role in ROLES:
            member = role_profile(profile, role)
            if member.serving.port is not None:
                fix = f"change [disaggregation.{role}] port in the profile"
                wanted.append((member.serving.host, member.serving.port, f"the {role} instance", fix))
    relay = relay_port(profile, options)
    if relay is not None:
        wanted.append(("127.0.0.1", relay, "the relay", _relay_remedy(options)))
    for i, (_, port, whose, _) in enumerate(wanted):
        for _, other, other_whose, _ in wanted[i + 1 :]:
            if port == other:
                raise UsageError(f"port {port} is given to both {whose} and {other_whose}: give each its own")
    for host, port, _, fix in wanted:
        check_free(host, port, fix)


def _relay_remedy(options: ServeOptions) -> str:
    """What to do when the relay's port is taken: another `--relay-port`, or for a pair (whose relay takes the
    profile's port) another `--port`."""
    return "pass --relay-port" if options.relay_port is not None else "pass --port"


def _serve_session(profile: Profile, folder: Path, options: ServeOptions, say: Say, result: Say, phase: Phase) -> None:
    pd = profile.disaggregation
    if pd is None or pd.storage_path is None:
        _serve(profile, folder, options, say, result, phase)
        return
    # ExampleConnector writes every prompt's KV cache to its folder and never deletes it: this session's
    # files go to a subfolder of its own, removed when the session ends (nothing else there is touched)
    kv = Path(pd.storage_path) / folder.name
    try:
        kv.mkdir(parents=True)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot create the KV folder {kv}: {exc.strerror or exc}") from None
    session = profile.model_copy(update={"disaggregation": pd.model_copy(update={"storage_path": str(kv)})})
    try:
        _serve(session, folder, options, say, result, phase)
    finally:
        files = sum(1 for p in kv.rglob("*") if p.is_file())
        shutil.rmtree(kv, ignore_errors=True)
        say(f"removed this session's KV folder {kv} ({files} file(s) ExampleConnector wrote)")


def _serve(profile: Profile, folder: Path, options: ServeOptions, say: Say, result: Say, phase: Phase) -> None:
    engine = engines.get(profile.engine)
    members = [role_profile(profile, role) for role in ROLES] if profile.disaggregation else [profile]
    for member in members:
        rendered = engine.launch_command(member, member.serving.python, member.model.path, 0)
        if rendered.notes:
            raise UsageError(f"refusing to launch what {profile.engine} cannot run as written: {rendered.notes[0]}")
        check_host_memory(member)
    with phase(None) as status:  # says something only where loadproof installs the engine itself
        engine.prepare(status, profile)
    relay_state: dict[str, Any] = {}
    states: dict[str, str] = {}
    roles: list[str] = list(ROLES) if profile.disaggregation else ["engine"]
    ports = [m.serving.port or free_port(m.serving.host) for m in members]
    supervisors: list[Supervisor] = []

    def watcher(role: str, member: Profile, port: int) -> Callable[[dict[str, Any]], None]:
        def on_event(row: dict[str, Any]) -> None:
            kind = row["kind"]
            detail = {k: v for k, v in row.items() if k not in ("wall_time_s", "kind", "state", "log")}
            say(
                f"[{kind}] "
                + ("" if role == "engine" else f"{role}: ")
                + ", ".join(f"{k}={v}" for k, v in detail.items())
            )
            states[role] = row["state"]
            relay = relay_state.get("relay")
            if relay is not None:
                down = [f"{r} engine {states.get(r, 'starting')}" for r in roles if states.get(r) != READY]
                relay.paused_reason = "; ".join(down) or None
            if kind == "ready":
                sup = supervisors[roles.index(role)]
                assert sup.engine is not None, "a supervisor reports ready only once it has launched its engine"
                result(
                    f"serving {member.model.served_name}"
                    + ("" if role == "engine" else f" ({role} instance)")
                    + f" at {base_url(member.serving.host, port)} (Ctrl-C stops it; log: "
                    f"{row.get('log') or sup.engine.log_path})"
                )

        return on_event

    for role, member, port in zip(roles, members, ports):
        supervisors.append(
            Supervisor(
                launch=partial(embedded.launch, member, port),
                served_name=member.model.served_name,
                gpus_needed=member.parallel.gpus if engine.needs_gpus else 0,
                ready_timeout_s=member.serving.ready_timeout_s,
                events_path=folder / ("events.jsonl" if role == "engine" else f"events-{role}.jsonl"),
                policy=SupervisorPolicy(
                    probe_interval_s=options.probe_interval_s,
                    probe_timeout_s=options.probe_timeout_s,
                    max_restarts=options.max_restarts,
                    backoff_initial_s=options.backoff_s,
                ),
                on_event=watcher(role, member, port),
                prober=prober_for(member.serving),
            )
        )
    say(f"supervisor events: {folder}")
    relay_at = relay_port(profile, options)
    if relay_at is not None:
        # the relay reaches the engine with LOADPROOF_UPSTREAM_API_KEY, else with the key the profile gives it
        rendered = engine.launch_command(members[-1], members[-1].serving.python, members[-1].model.path, 0)
        engine_key = engine.api_key(rendered.argv, {**os.environ, **rendered.env})
        base = [base_url(m.serving.host, port) for m, port in zip(members, ports)]
        pd = profile.disaggregation
        block = known_block_size(profile) if pd is not None and pd.storage_path else None  # ExampleConnector's
        prefill = PrefillConfig(base[0], pd.connector, pd.storage_path, block) if pd is not None else None
        at = (relay_at, _relay_remedy(options))
        state = _serve_with_relay(supervisors, relay_state, base[-1], prefill, at, engine_key, say, result)
    else:
        state = _supervise(supervisors, say)
    failed = [sup for sup in supervisors if sup.state == FAILED]
    if state == FAILED or failed:
        raise EnvironmentFailure(f"FAILED: {(failed or supervisors)[0].failure}")


def _supervise(
    supervisors: list[Any],
    say: Say,
    while_running: Callable[[], None] | None = None,
    on_end: Callable[[], None] | None = None,
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
        say("stopping the engine" + ("s" if len(supervisors) > 1 else ""))
        raise
    finally:
        for sup, done in zip(supervisors, dones):
            _stop_and_join(sup, done)
    if "error" in outcome:
        raise outcome["error"]
    return str(outcome.get("state", "stopped"))


def _stop_and_join(supervisor: Any, done: threading.Event) -> None:
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


def _serve_with_relay(
    supervisors: list[Any],
    relay_state: dict[str, Any],
    upstream: str,
    prefill: PrefillConfig | None,
    at: tuple[int, str],
    engine_key: str | None,
    say: Say,
    result: Say,
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

    return _supervise(supervisors, say, relay_in_this_thread, end_relay)
