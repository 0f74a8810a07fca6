"""`loadproof serve` of a profile with `[replicas]`: N instances of its engine, each under a supervisor of its own,
behind a real router (vllm-router or sglang-router, engines/router.py) that `serve` starts, supervises like an engine
(restarted if it exits, within the same restart budget) and stops on every way out; optionally the relay in front of
the router (`--relay`). And `loadproof router`: the router alone, in front of replicas already running.

Before anything starts: each replica's command is one the engine can run, every port named is free and none is given
twice, the router is installed, and the host can hold the replicas (engines/replicas.py: their estimated memory
against what the host has available; too many is one line, exit 2). The router starts with the replicas and waits
for all of them before it listens (its worker start-up check), so its `ready` comes last. Each replica's events go to
`events-replica-N.jsonl`, the router's to `events-router.jsonl`; the lines say `replica N:` or `router:`. What a run
needs is printed as each member is ready: each replica's URL and /metrics, the router's URL and policy, and the
router's own metrics (its Prometheus port).
"""

from __future__ import annotations

import http.client
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines import embedded, engines
from loadproof.engines.base import LaunchCommand
from loadproof.engines.process import EngineProcess, free_port
from loadproof.engines.replicas import (
    check_fleet_memory,
    fleet_of,
    replica_memory,
    replica_profiles,
    router_settings,
    weights_bytes,
)
from loadproof.engines.router import (
    ROUTER_KIND,
    ROUTER_TOOLS,
    RouterKind,
    RouterSettings,
    router_argv,
    router_executable,
)
from loadproof.errors import EnvironmentFailure, Interrupted, UsageError
from loadproof.protocol.ports import check_free
from loadproof.protocol.urls import base_url, url_of
from loadproof.store.run_dir import new_run_id
from loadproof.supervisor.loop import FAILED, READY, Supervisor
from loadproof.supervisor.policy import SupervisorPolicy
from loadproof.supervisor.probe import ProbeOutcome, ProbeResult, prober_for
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
from loadproof.telemetry.host import host_available_bytes, host_memory_bytes

ROUTER_READY_SLACK_S = 60.0  # the router's readiness: the replicas' bound (it waits for them), and this
DRY_RUN_PORTS = (
    8080,
    29000,
    8001,
)  # a dry run's router, router metrics and first replica, where the profile names none


def dry_run_fleet(profile: Profile) -> tuple[list[RenderedStep], list[str]]:
    """Every replica's command and the router's, on the profile's ports (else 8001, 8002, ...; the router on 8080,
    its metrics on 29000), and the notes on what cannot run (a router not installed among them)."""
    engine, spec = engines.get(profile.engine), fleet_of(profile)
    steps: list[RenderedStep] = []
    notes: list[str] = []
    urls: list[str] = []
    for i, member in enumerate(replica_profiles(profile), start=1):
        port = member.serving.port or DRY_RUN_PORTS[2] + i - 1
        command = engine.launch_command(member, engine.interpreter(member), embedded.model_path_for(member), port)
        steps.append(RenderedStep(f"replica {i}", command.argv, command.env))
        notes += command.notes
        urls.append(base_url(member.serving.host, port))
    try:
        executable = router_executable(spec.router)
    except UsageError as exc:
        executable = ROUTER_TOOLS[spec.router].executable
        notes.append(str(exc))
    argv = router_argv(
        executable,
        router_settings(profile),
        urls,
        profile.serving.host,
        profile.serving.port or DRY_RUN_PORTS[0],
        spec.prometheus_port or DRY_RUN_PORTS[1],
    )
    return [*steps, RenderedStep(f"the router ({spec.router}, {spec.policy})", argv, {})], notes


def check_fleet_host(profile: Profile, available: int | None = None, total: int | None = None) -> None:
    """The replicas' estimated memory against what this host has available (engines/replicas.py)."""
    first = replica_profiles(profile)[0]
    each = replica_memory(first, weights_bytes(embedded.model_path_for(first)))
    have = host_available_bytes() if available is None else available
    check_fleet_memory(fleet_of(profile).count, each, have, host_memory_bytes() if total is None else total)


def check_fleet_ports(profile: Profile, options: ServeOptions) -> None:
    """Every port the fleet is to listen on that is named (the router's, its metrics', each replica's, the relay's),
    free and given once: one line naming it, before anything is installed or launched."""
    spec, host = fleet_of(profile), profile.serving.host
    wanted = [(port, whose) for port, whose in spec.taken_ports(profile.serving.port)]
    if options.relay_port is not None:
        wanted.append((options.relay_port, "the relay"))
    for i, (port, whose) in enumerate(wanted):
        for other, other_whose in wanted[i + 1 :]:
            if port == other:
                raise UsageError(f"port {port} is given to both {whose} and {other_whose}: give each its own")
    for port, whose in wanted:
        if whose == "the relay":
            check_free("127.0.0.1", port, relay_remedy(options))
        else:
            check_free(
                host, port, "pass --port" if whose.startswith("the router") else "change [replicas] in the profile"
            )


def serve_fleet(profile: Profile, options: ServeOptions, say: Say, result: Say, phase: Phase) -> None:
    """Launch and supervise `profile`'s replicas and its router until Ctrl-C (Interrupted) or one of them gives up
    (EnvironmentFailure)."""
    engine = engines.get(profile.engine)
    members = replica_profiles(profile)
    settings = router_settings(profile)
    executable = router_executable(settings.router)
    for member in members:
        rendered = engine.launch_command(member, member.serving.python, member.model.path, 0)
        if rendered.notes:
            raise UsageError(f"refusing to launch what {profile.engine} cannot run as written: {rendered.notes[0]}")
        check_host_memory(member)
    check_fleet_ports(profile, options)
    folder = options.out / new_run_id("serve")
    try:
        with phase(None) as status:  # says something only where loadproof installs the engine itself
            engine.prepare(status, profile)
        check_fleet_host(profile)
        _serve_fleet(profile, members, settings, executable, folder, options, say, result)
    except KeyboardInterrupt:  # every process is stopped by now (`supervise_all`)
        relay = "the relay, " if options.relay_port is not None else ""
        events = f" (supervisor events: {folder})" if folder.exists() else ""
        raise Interrupted(f"interrupted; stopped {relay}the router and {len(members)} replicas{events}") from None


def distinct_free_ports(host: str, given: list[int | None], taken: set[int]) -> list[int]:
    """`given`, each None replaced by a free port that is none of the others (nor in `taken`)."""
    out: list[int] = []
    used = set(taken) | {p for p in given if p is not None}
    for port in given:
        while port is None or (port in out):
            candidate = free_port(host)
            port = None if candidate in used else candidate
        used.add(port)
        out.append(port)
    return out


def _serve_fleet(
    profile: Profile,
    members: list[Profile],
    settings: RouterSettings,
    executable: str,
    folder: Path,
    options: ServeOptions,
    say: Say,
    result: Say,
) -> None:
    spec, host = fleet_of(profile), profile.serving.host
    relay_taken = {options.relay_port} if options.relay_port is not None else set()
    ports = distinct_free_ports(
        host, [*(m.serving.port for m in members), profile.serving.port, spec.prometheus_port], relay_taken
    )
    replica_ports, router_port, metrics_port = ports[:-2], ports[-2], ports[-1]
    urls = [base_url(host, port) for port in replica_ports]
    router_url, metrics_url = base_url(host, router_port), url_of(base_url(host, metrics_port), "/metrics")
    engine = engines.get(profile.engine)
    rendered = engine.launch_command(members[0], members[0].serving.python, members[0].model.path, 0)
    kind = RouterKind(worker_key=engine.api_key(rendered.argv, rendered.env))
    argv = router_argv(executable, settings, urls, host, router_port, metrics_port)
    roles = [f"replica {i}" for i in range(1, len(members) + 1)] + ["router"]
    states: dict[str, str] = {}
    relay_state: dict[str, Any] = {}
    supervisors: list[Supervisor] = []

    logs: dict[str, str] = {}
    announced: set[str] = set()  # the router's line once per start of it, once every replica is ready too

    def announce(role: str) -> None:
        if role != "router":
            url = urls[roles.index(role)]
            result(
                f"{role}: serving {profile.model.served_name} at {url}, metrics {url_of(url, '/metrics')} "
                f"(log: {logs[role]})"
            )
        if "router" in announced or any(states.get(r) != READY for r in roles):
            return  # the router may pass its start-up check on a replica's /health before its supervisor says ready
        announced.add("router")
        result(
            f"router: {settings.router} ({settings.policy}) serving {profile.model.served_name} at {router_url} "
            f"in front of {len(members)} replicas; its metrics: {metrics_url} (Ctrl-C stops the fleet; log: "
            f"{logs['router']})"
        )
        result("engine metrics: " + ",".join(url_of(url, "/metrics") for url in urls))

    def watcher(role: str) -> Callable[[dict[str, Any]], None]:
        def on_event(row: dict[str, Any]) -> None:
            detail = {k: v for k, v in row.items() if k not in ("wall_time_s", "kind", "state", "log")}
            say(f"[{row['kind']}] {role}: " + ", ".join(f"{k}={v}" for k, v in detail.items()))
            states[role] = row["state"]
            relay = relay_state.get("relay")
            if relay is not None:  # the router answers for the fleet: the relay pauses while it is not ready
                relay.paused_reason = None if states.get("router") == READY else f"router {states.get('router')}"
            if row["kind"] == "start":
                logs[role] = str(row.get("log", ""))
                if role == "router":
                    announced.discard("router")
            elif row["kind"] == "ready":
                announce(role)

        return on_event

    policy = SupervisorPolicy(
        probe_interval_s=options.probe_interval_s,
        probe_timeout_s=options.probe_timeout_s,
        max_restarts=options.max_restarts,
        backoff_initial_s=options.backoff_s,
    )
    for role, member, port in zip(roles, members, replica_ports):
        supervisors.append(
            Supervisor(
                launch=partial(embedded.launch, member, port),
                served_name=member.model.served_name,
                gpus_needed=member.parallel.gpus if engine.needs_gpus else 0,
                ready_timeout_s=member.serving.ready_timeout_s,
                events_path=folder / f"events-{role.replace(' ', '-')}.jsonl",
                policy=policy,
                on_event=watcher(role),
                prober=prober_for(member.serving),
            )
        )
    supervisors.append(
        router_supervisor(
            kind,
            argv,
            host,
            router_port,
            folder,
            profile.model.served_name,
            settings.startup_timeout_s + ROUTER_READY_SLACK_S,
            policy,
            watcher("router"),
        )
    )
    say(f"supervisor events: {folder}")
    stopping = f"stopping the router and {len(members)} replicas"
    if options.relay_port is not None:
        at = (options.relay_port, relay_remedy(options))
        state = serve_with_relay(supervisors, relay_state, router_url, None, at, kind.worker_key, say, result, stopping)
    else:
        state = supervise_all(supervisors, say, stopping=stopping)
    failed = [sup for sup in supervisors if sup.state == FAILED]
    if state == FAILED or failed:
        raise EnvironmentFailure(f"FAILED: {(failed or supervisors)[0].failure}")


def router_supervisor(
    kind: RouterKind,
    argv: list[str],
    host: str,
    port: int,
    folder: Path,
    served_name: str,
    ready_timeout_s: float,
    policy: SupervisorPolicy,
    on_event: Callable[[dict[str, Any]], None] | None,
) -> Supervisor:
    """The router under a supervisor as an engine is: ready once it listens and lists the model (through a replica),
    restarted when it exits or stops answering its own /health; its log in `folder`/router.log."""

    def launch() -> EngineProcess:
        process = EngineProcess(kind, LaunchCommand(argv=argv, env={}), host, port, folder / "router.log")
        process.start()
        return process

    return Supervisor(
        launch=launch,
        served_name=served_name,
        gpus_needed=0,
        ready_timeout_s=ready_timeout_s,
        events_path=folder / "events-router.jsonl",
        policy=policy,
        on_event=on_event,
        prober=router_answers,
        work_meter=lambda _process: None,
    )


def router_answers(process: EngineProcess, served_name: str, timeout_s: float, stop: threading.Event) -> ProbeResult:
    """The router's liveness: its own /health answers at all (any status: a replica down is the router's to route
    around and the replica's supervisor's to restart, not a reason to restart the router)."""
    try:
        with urllib.request.urlopen(url_of(process.url, ROUTER_KIND.health_path), timeout=min(timeout_s, 10.0)):
            return ProbeResult(ProbeOutcome.OK)
    except urllib.error.HTTPError as exc:  # it answered
        exc.close()
        return ProbeResult(ProbeOutcome.OK, f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return ProbeResult(ProbeOutcome.TIMEOUT, str(reason))
        refused = isinstance(reason, ConnectionRefusedError)
        return ProbeResult(ProbeOutcome.REFUSED if refused else ProbeOutcome.ERROR, str(reason))


# -- `loadproof router` ------------------------------------------------------------------------------------------


def run_router(
    settings: RouterSettings,
    worker_urls: list[str],
    port: int,
    prometheus_port: int | None,
    options: ServeOptions,
    say: Say,
    result: Say,
    host: str = "127.0.0.1",
) -> None:
    """The router alone, supervised, in front of replicas already running, until Ctrl-C (Interrupted, exit 130)."""
    if len(worker_urls) < 1 or any(not url.startswith(("http://", "https://")) for url in worker_urls):
        raise UsageError(f"--worker-urls takes http(s) URLs, comma-separated (got {','.join(worker_urls)!r})")
    executable = router_executable(settings.router)
    if prometheus_port == port:
        raise UsageError(f"port {port} is given to both --port and --prometheus-port: give each its own")
    check_free(host, port, "pass --port", "another router or engine?")
    if prometheus_port is not None:
        check_free(host, prometheus_port, "pass --prometheus-port", "another router?")
    metrics_port = prometheus_port or distinct_free_ports(host, [None], {port})[0]
    argv = router_argv(executable, settings, worker_urls, host, port, metrics_port)
    folder = options.out / new_run_id("router")
    url, metrics = base_url(host, port), url_of(base_url(host, metrics_port), "/metrics")

    def on_event(row: dict[str, Any]) -> None:
        detail = {k: v for k, v in row.items() if k not in ("wall_time_s", "kind", "state", "log")}
        say(f"[{row['kind']}] router: " + ", ".join(f"{k}={v}" for k, v in detail.items()))
        if row["kind"] == "ready":
            result(
                f"router: {settings.router} ({settings.policy}) at {url} in front of {', '.join(worker_urls)}; "
                f"its metrics: {metrics} (Ctrl-C stops it; log: {folder / 'router.log'})"
            )

    policy = SupervisorPolicy(
        probe_interval_s=options.probe_interval_s,
        probe_timeout_s=options.probe_timeout_s,
        max_restarts=options.max_restarts,
        backoff_initial_s=options.backoff_s,
    )
    # "" is in every model list: the router is ready once it listens and a worker answers /v1/models through it
    sup = router_supervisor(RouterKind(), argv, host, port, folder, "", settings.startup_timeout_s, policy, on_event)
    say(f"supervisor events: {folder}")
    try:
        state = supervise_all([sup], say, stopping="stopping the router")
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; stopped the router (supervisor events: {folder})") from None
    if state == FAILED or sup.state == FAILED:
        raise EnvironmentFailure(f"FAILED: {sup.failure}")
