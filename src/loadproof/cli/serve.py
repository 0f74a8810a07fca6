"""`loadproof serve` (the engine under its supervisor, optionally behind the relay) and `loadproof relay`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.common import OutOption, print_command, with_serving
from loadproof.config.profile import load_profile, packaged_profile
from loadproof.engines import embedded, engines
from loadproof.engines.process import free_port
from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.relay import Relay, RelayConfig
from loadproof.relay.serve import UPSTREAM_KEY_ENV, RelayServer, configure_logging, load_keys
from loadproof.relay.serve import run as run_relay
from loadproof.store.run_dir import new_run_id
from loadproof.supervisor import FAILED, READY, Supervisor, SupervisorPolicy

RELAY_DRAIN_S = 5.0  # after Ctrl-C, how long the relay lets streams in flight end before it cancels them


@app.command()
def serve(
    profile_path: Annotated[Optional[Path], typer.Argument(metavar="PROFILE", help="profile TOML")] = None,
    embedded_engine: Annotated[bool, typer.Option("--embedded", help="the embedded default engine")] = False,
    dry_run: Annotated[bool, typer.Option(help="print the engine command and exit")] = False,
    eager: Annotated[bool, typer.Option(help="skip graph compilation: faster start, slower decode")] = False,
    port: Annotated[Optional[int], typer.Option(help="engine port on 127.0.0.1; default: a free one")] = None,
    with_relay: Annotated[bool, typer.Option("--relay", help="also run the relay in front of the engine")] = False,
    relay_port: Annotated[int, typer.Option(help="the relay's port")] = 8080,
    max_restarts: Annotated[int, typer.Option(help="restarts allowed within the restart window, then FAILED")] = 3,
    probe_interval_s: Annotated[float, typer.Option(help="seconds between liveness probes (a real completion)")] = 10.0,
    probe_timeout_s: Annotated[float, typer.Option(help="a probe unanswered this long counts as a hang")] = 60.0,
    backoff_s: Annotated[float, typer.Option(help="first restart delay; doubles, capped at 120 s")] = 5.0,
    out: OutOption = Path("runs"),
) -> None:
    """Launch and supervise the engine of a profile (or the embedded default) until Ctrl-C."""
    if embedded_engine == (profile_path is not None):
        raise UsageError("give either a PROFILE or --embedded")
    if max_restarts < 0 or probe_interval_s <= 0 or probe_timeout_s <= 0 or backoff_s <= 0:
        raise UsageError("--max-restarts must be >= 0; --probe-interval-s, --probe-timeout-s and --backoff-s must be > 0")
    profile = packaged_profile("embedded") if embedded_engine else load_profile(profile_path)  # type: ignore[arg-type]
    profile = with_serving(profile, eager, port)
    engine = engines.get(profile.engine)
    if dry_run:
        python = engine.interpreter(profile)
        model_path = embedded.model_path_for(profile)
        serve_port = profile.serving.port or 8000
        command = engine.launch_command(profile, python, model_path, serve_port)
        if profile.parallel.nodes > 1:
            for step in engine.cluster_commands(profile, python, model_path, serve_port):
                ui.out.print(f"# on {step.node}:", markup=False, highlight=False)
                print_command(step.argv, step.env)
        else:
            print_command(command.argv, command.env)
        for note in command.notes:
            ui.err.print(f"note: {note}", markup=False, highlight=False)
        return
    if profile.parallel.nodes > 1:
        raise UsageError("multi-node profiles are launched host by host: run --dry-run and start each step on its host")
    rendered = engine.launch_command(profile, profile.serving.python, profile.model.path, 0)
    if rendered.notes:
        raise UsageError(f"refusing to launch what {profile.engine} cannot run as written: {rendered.notes[0]}")
    with ui.status(None) as status:  # says something only where loadproof installs the engine itself
        engine.prepare(status)
    engine_port = profile.serving.port or free_port(profile.serving.host)
    folder = out / new_run_id("serve")
    relay_state: dict[str, Any] = {}

    def on_event(row: dict[str, Any]) -> None:
        kind = row["kind"]
        detail = {k: v for k, v in row.items() if k not in ("wall_time_s", "kind", "state", "log")}
        ui.err.print(f"[{kind}] " + ", ".join(f"{k}={v}" for k, v in detail.items()), markup=False, highlight=False)
        relay = relay_state.get("relay")
        if relay is not None:
            relay.paused_reason = None if row["state"] == READY else f"engine {row['state']}"
        if kind == "ready":
            ui.out.print(f"serving {profile.model.served_name} at http://{profile.serving.host}:{engine_port} "
                         f"(Ctrl-C stops it; log: {row.get('log') or supervisor.engine.log_path})", markup=False,
                         highlight=False)

    supervisor = Supervisor(
        launch=lambda: embedded.launch(profile, engine_port),
        served_name=profile.model.served_name,
        gpus_needed=profile.parallel.gpus if engine.needs_gpus else 0,
        ready_timeout_s=profile.serving.ready_timeout_s,
        events_path=folder / "events.jsonl",
        policy=SupervisorPolicy(probe_interval_s=probe_interval_s, probe_timeout_s=probe_timeout_s,
                                max_restarts=max_restarts, backoff_initial_s=backoff_s),
        on_event=on_event,
    )
    ui.err.print(f"supervisor events: {folder / 'events.jsonl'}")
    if with_relay:
        # the relay reaches the engine with LOADPROOF_UPSTREAM_API_KEY, else with the key the profile gives it
        engine_key = engine.api_key(rendered.argv, {**os.environ, **rendered.env})
        state = _serve_with_relay(supervisor, relay_state, f"http://{profile.serving.host}:{engine_port}", relay_port,
                                  engine_key)
    else:
        state = _supervise(supervisor)
    if state == FAILED:
        raise EnvironmentFailure(f"FAILED: {supervisor.failure}")


def _supervise(supervisor: Any, while_running: Callable[[], None] | None = None,
               on_end: Callable[[], None] | None = None) -> str:
    """`supervisor.run()` in a thread of its own (then `on_end()` there), `while_running()` (or a wait) in
    this one. However this thread leaves (the supervisor ended, Ctrl-C, SIGTERM, an error), the supervisor
    is stopped and waited for, so the engine's process group is gone before `serve` exits."""
    outcome: dict[str, Any] = {}
    # waited on instead of Thread.join: on Python 3.11 a join interrupted by Ctrl-C can leave the thread
    # looking ended while it runs on (CPython #90882), and `serve` would exit with the engine still up
    done = threading.Event()

    def supervise() -> None:
        try:
            outcome["state"] = supervisor.run()
        except BaseException as exc:  # handed to the main thread, which reports it
            outcome["error"] = exc
        finally:
            done.set()
            if on_end is not None:
                on_end()

    thread = threading.Thread(target=supervise, name="loadproof-supervisor", daemon=True)
    try:
        thread.start()
        if while_running is not None:
            while_running()
        while not done.wait(0.5):
            pass
    except BaseException:
        ui.err.print("stopping the engine", markup=False, highlight=False)
        raise
    finally:
        _stop_and_join(supervisor, done)
    if "error" in outcome:
        raise outcome["error"]
    return str(outcome.get("state", "stopped"))


def _stop_and_join(supervisor: Any, done: Any) -> None:
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


def _serve_with_relay(supervisor: Any, relay_state: dict[str, Any], upstream: str, relay_port: int,
                      engine_key: str | None) -> str:
    """The supervisor in a thread, the relay in front (503 while the engine is not ready). Ctrl-C or SIGTERM
    stops the engine at once (streams in flight end with an in-band error) and the relay within
    RELAY_DRAIN_S; then `serve` exits 130, as without the relay."""
    configure_logging()
    relay = Relay(RelayConfig(upstream=upstream, api_keys=load_keys(None),
                              upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV) or engine_key))
    relay.paused_reason = "engine starting"
    relay_state["relay"] = relay

    class StopsTheEngineToo(RelayServer):
        def handle_exit(self, sig: int, frame: Any) -> None:  # the relay's signal handler, in the main thread
            supervisor.stop()
            super().handle_exit(sig, frame)

    # a stream never holds `serve` up for long
    http = StopsTheEngineToo(relay, "127.0.0.1", relay_port, drain_s=RELAY_DRAIN_S)

    def relay_in_this_thread() -> None:
        ui.out.print(f"relay listening on http://127.0.0.1:{relay_port}", markup=False, highlight=False)
        http.run()  # returns when the supervisor ended, or re-raises Ctrl-C / SIGTERM once it drained

    def end_relay() -> None:
        http.should_exit = True

    return _supervise(supervisor, relay_in_this_thread, end_relay)


@app.command()
def relay(
    upstream: Annotated[str, typer.Option(help="the engine's base URL (from config only, never from requests)")],
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    max_in_flight: Annotated[int, typer.Option(help="requests relayed at once; more get 429")] = 64,
    deadline_s: Annotated[float, typer.Option(help="total deadline per request")] = 3600.0,
    heartbeat_s: Annotated[float, typer.Option(help="SSE heartbeat interval while the engine is silent")] = 5.0,
    max_body_mib: Annotated[float, typer.Option(help="request body limit")] = 64.0,
    body_timeout_s: Annotated[float, typer.Option(
        help="the request head and body must arrive within this (never past the deadline); 408 after")] = 60.0,
    keys_file: Annotated[Optional[Path], typer.Option(help="API keys, one a line (also LOADPROOF_RELAY_KEYS)")] = None,
) -> None:
    """The streaming relay alone, in front of an OpenAI-compatible engine."""
    if not upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream must be an http(s) URL (got {upstream!r})")
    if max_in_flight < 1 or deadline_s <= 0 or heartbeat_s <= 0 or max_body_mib <= 0 or body_timeout_s <= 0:
        raise UsageError("--max-in-flight, --deadline-s, --heartbeat-s, --max-body-mib and --body-timeout-s "
                         "must be positive")
    config = RelayConfig(upstream=upstream, max_in_flight=max_in_flight, deadline_s=deadline_s,
                         heartbeat_s=heartbeat_s, body_timeout_s=body_timeout_s,
                         max_body_bytes=int(max_body_mib * 1024 * 1024),
                         api_keys=load_keys(keys_file), upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV))
    run_relay(config, host, port)
