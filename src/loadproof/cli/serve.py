"""`loadproof serve` (the engine under its supervisor, optionally behind the relay) and `loadproof relay`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from loadproof.cli import app, ui
from loadproof.config.profile import load_profile, packaged_profile
from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.cli.common import OutOption, with_serving, print_command


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
    from loadproof.engines import embedded, engines
    from loadproof.engines.process import free_port
    from loadproof.store.run_dir import new_run_id
    from loadproof.supervisor import FAILED, READY, Supervisor, SupervisorPolicy

    if embedded_engine == (profile_path is not None):
        raise UsageError("give either a PROFILE or --embedded")
    profile = packaged_profile("embedded") if embedded_engine else load_profile(profile_path)  # type: ignore[arg-type]
    profile = with_serving(profile, eager, port)
    engine = engines.get(profile.engine)
    if dry_run:
        python = str(embedded.paths().python) if profile.engine == "embedded" else profile.serving.python
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
    notes = engine.launch_command(profile, profile.serving.python, profile.model.path, 0).notes
    unsupported = [n for n in notes if n.startswith("unsupported")]
    if unsupported:
        raise UsageError(f"refusing to launch what {profile.engine} cannot run as written: {unsupported[0]}")
    if profile.engine == "embedded":
        with ui.status("preparing the embedded engine") as status:
            embedded.ensure_engine(status)
            embedded.ensure_model(status)
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
        gpus_needed=0 if profile.engine == "embedded" else profile.parallel.gpus,
        ready_timeout_s=profile.serving.ready_timeout_s,
        events_path=folder / "events.jsonl",
        policy=SupervisorPolicy(probe_interval_s=probe_interval_s, probe_timeout_s=probe_timeout_s,
                                max_restarts=max_restarts, backoff_initial_s=backoff_s),
        on_event=on_event,
    )
    ui.err.print(f"supervisor events: {folder / 'events.jsonl'}")
    if with_relay:
        state = _serve_with_relay(supervisor, relay_state, f"http://{profile.serving.host}:{engine_port}", relay_port)
    else:
        state = supervisor.run()
    if state == FAILED:
        raise EnvironmentFailure(f"FAILED: {supervisor.failure}")


def _serve_with_relay(supervisor: Any, relay_state: dict[str, Any], upstream: str, relay_port: int) -> str:
    """The supervisor in a thread, the relay in front (503 while the engine is not ready)."""
    import threading

    from loadproof.relay import Relay, RelayConfig
    from loadproof.relay.serve import UPSTREAM_KEY_ENV, configure_logging, load_keys, server

    configure_logging()
    relay = Relay(RelayConfig(upstream=upstream, api_keys=load_keys(None),
                              upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV)))
    relay.paused_reason = "engine starting"
    relay_state["relay"] = relay
    http = server(relay, "127.0.0.1", relay_port)
    result: dict[str, str] = {}

    def supervise() -> None:
        result["state"] = supervisor.run()
        http.should_exit = True

    thread = threading.Thread(target=supervise, name="loadproof-supervisor", daemon=True)
    thread.start()
    ui.out.print(f"relay listening on http://127.0.0.1:{relay_port}", markup=False, highlight=False)
    try:
        http.run()
    finally:
        supervisor.stop()
        thread.join(timeout=60)
    return result.get("state", "stopped")


@app.command()
def relay(
    upstream: Annotated[str, typer.Option(help="the engine's base URL (from config only, never from requests)")],
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    max_in_flight: Annotated[int, typer.Option(help="requests relayed at once; more get 429")] = 64,
    deadline_s: Annotated[float, typer.Option(help="total deadline per request")] = 3600.0,
    heartbeat_s: Annotated[float, typer.Option(help="SSE heartbeat interval while the engine is silent")] = 5.0,
    max_body_mib: Annotated[float, typer.Option(help="request body limit")] = 64.0,
    keys_file: Annotated[Optional[Path], typer.Option(help="API keys, one a line (also LOADPROOF_RELAY_KEYS)")] = None,
) -> None:
    """The streaming relay alone, in front of an OpenAI-compatible engine."""
    from loadproof.relay import RelayConfig
    from loadproof.relay.serve import UPSTREAM_KEY_ENV, load_keys, run

    if not upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream must be an http(s) URL (got {upstream!r})")
    if max_in_flight < 1 or deadline_s <= 0 or heartbeat_s <= 0 or max_body_mib <= 0:
        raise UsageError("--max-in-flight, --deadline-s, --heartbeat-s and --max-body-mib must be positive")
    config = RelayConfig(upstream=upstream, max_in_flight=max_in_flight, deadline_s=deadline_s,
                         heartbeat_s=heartbeat_s, max_body_bytes=int(max_body_mib * 1024 * 1024),
                         api_keys=load_keys(keys_file), upstream_api_key=os.environ.get(UPSTREAM_KEY_ENV))
    run(config, host, port)
