"""`loadproof serve`: a profile's engine under the supervisor, optionally behind the relay, until Ctrl-C; a
disaggregated profile's two instances, each under a supervisor of its own, always behind the relay, which
prefills each request on the one and decodes it on the other (relay.prefill).

`ServeOptions` are the command's settings, checked once. `dry_run` renders the exact command(s) a
profile would launch, host by host; `serve` checks that every port it is to listen on is free (the engine's,
each instance's of a pair, the relay's: a port another process holds is one line, exit 2, before anything is
installed or launched), prepares the engine (the embedded one installs itself once), runs the supervisor in a
thread of its own and, with the relay, the relay in this one (503 while the engine is not ready), and leaves
nothing of the engine's process group behind on any way out; Ctrl-C ends it with a line saying what it stopped.
A profile with `[replicas]` goes to supervisor/fleet.py; what both share (the settings, the supervisors' threads,
the relay in front) is supervisor/session.py's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines import embedded, engines
from loadproof.engines.disaggregation import ROLES, role_profile
from loadproof.engines.process import free_port
from loadproof.errors import EnvironmentFailure, Interrupted, UsageError
from loadproof.planner.profile_plan import known_block_size
from loadproof.protocol.ports import check_free
from loadproof.protocol.urls import base_url
from loadproof.relay.prefill import PrefillConfig
from loadproof.store.run_dir import new_run_id
from loadproof.supervisor import fleet
from loadproof.supervisor.loop import FAILED, READY, Supervisor
from loadproof.supervisor.policy import SupervisorPolicy
from loadproof.supervisor.probe import prober_for
from loadproof.supervisor.session import (
    Phase,
    RenderedStep,
    Say,
    ServeOptions,
    check_host_memory,
    relay_remedy,
    serve_with_relay,
    supervise_all,
)

__all__ = ["RenderedStep", "ServeOptions", "check_host_memory", "dry_run", "serve"]


def dry_run(profile: Profile) -> tuple[list[RenderedStep], list[str]]:
    """The exact command(s) `serve` would launch for `profile`, and the engine's notes on what it cannot run."""
    if profile.replicas is not None:
        return fleet.dry_run_fleet(profile)
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


def serve(profile: Profile, options: ServeOptions, say: Say, result: Say, phase: Phase) -> None:
    """Launch and supervise `profile`'s engine (a disaggregated profile: its two instances, behind the relay)
    until Ctrl-C (KeyboardInterrupt) or a supervisor gives up (EnvironmentFailure). Events go to `say`; where
    it serves, to `result`. A profile with `[replicas]` is a fleet behind its router (supervisor/fleet.py)."""
    if profile.replicas is not None:
        fleet.serve_fleet(profile, options, say, result, phase)
        return
    if profile.parallel.nodes > 1:
        raise UsageError("multi-node profiles are launched host by host: run --dry-run and start each step on its host")
    check_ports(profile, options)
    folder = options.out / new_run_id("serve")
    try:
        _serve_session(profile, folder, options, say, result, phase)
    except KeyboardInterrupt:  # every engine is stopped by now (`supervise_all`), and nothing was measured
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
        wanted.append(("127.0.0.1", relay, "the relay", relay_remedy(options)))
    for i, (_, port, whose, _) in enumerate(wanted):
        for _, other, other_whose, _ in wanted[i + 1 :]:
            if port == other:
                raise UsageError(f"port {port} is given to both {whose} and {other_whose}: give each its own")
    for host, port, _, fix in wanted:
        check_free(host, port, fix)


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
        at = (relay_at, relay_remedy(options))
        state = serve_with_relay(supervisors, relay_state, base[-1], prefill, at, engine_key, say, result)
    else:
        state = supervise_all(supervisors, say)
    failed = [sup for sup in supervisors if sup.state == FAILED]
    if state == FAILED or failed:
        raise EnvironmentFailure(f"FAILED: {(failed or supervisors)[0].failure}")
