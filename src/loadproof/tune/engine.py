"""A grid point's engine, served as `loadproof serve` serves a profile, in this process: the supervisor
(`supervisor.loop.Supervisor`, its default policy: probes, restarts with backoff within a budget) in a thread
of its own, the engine a process group of its own started afresh for every point, and stopped, whatever
happens, when the point's measurement ends (Ctrl-C included).

The point's folder keeps `serve.log` (the supervisor's events, one line each, as `serve` prints them; the
ready line carries the engine's startup report), `events.jsonl` and `engine.log` (the engine's own output).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loadproof.config.profile import Profile
from loadproof.engines import embedded, engines
from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.protocol.ports import check_free
from loadproof.supervisor.loop import READY, Supervisor
from loadproof.supervisor.probe import prober_for
from loadproof.supervisor.serving import check_host_memory

READY_SLACK_S = 600.0  # beyond the profile's ready timeout: restarts and their backoff
WAIT_TICK_S = 0.5  # how often the wait for the engine looks again (a Ctrl-C is taken between looks)


@contextmanager
def served(profile: Profile, folder: Path, say: Callable[[str], None]) -> Iterator[float]:
    """`profile`'s engine on its serving port, supervised, ready: yields the seconds it took to be ready;
    stopped on the way out. EnvironmentFailure when it never became ready (the logs named)."""
    port = profile.serving.port
    if port is None or profile.disaggregation or profile.replicas or profile.parallel.nodes > 1:
        raise UsageError("tune measures a profile of one engine on this host, on a port it names")
    engine = engines.get(profile.engine)
    check_host_memory(profile)
    check_free(profile.serving.host, port, "pass --port")  # another engine there would answer in its place
    engine.prepare(say, profile)  # the embedded engine installs itself (and the profile's model) once
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "serve.log"
    settled = threading.Event()  # ready, or given up

    def on_event(row: dict[str, Any]) -> None:
        detail = {k: v for k, v in row.items() if k not in ("wall_time_s", "kind", "state", "log")}
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"[{row['kind']}] " + ", ".join(f"{k}={v}" for k, v in detail.items()) + "\n")
        if row["kind"] in ("ready", "give_up"):
            settled.set()

    supervisor = Supervisor(
        launch=lambda: embedded.launch(profile, port, folder / "engine.log"),
        served_name=profile.model.served_name,
        gpus_needed=profile.parallel.gpus if engine.needs_gpus else 0,
        ready_timeout_s=profile.serving.ready_timeout_s,
        events_path=folder / "events.jsonl",
        on_event=on_event,
        prober=prober_for(profile.serving),
    )
    done = threading.Event()
    failure: list[BaseException] = []

    def supervise() -> None:
        try:
            supervisor.run()
        except BaseException as exc:  # handed to the waiting thread, which reports it
            failure.append(exc)
        finally:
            done.set()
            settled.set()

    started = time.monotonic()
    threading.Thread(target=supervise, name="loadproof-tune-engine", daemon=True).start()
    try:
        deadline = started + profile.serving.ready_timeout_s + READY_SLACK_S
        while not settled.wait(WAIT_TICK_S):
            if time.monotonic() > deadline:
                break
        if failure:
            raise failure[0]
        if supervisor.state != READY:
            why = supervisor.failure or f"not ready after {time.monotonic() - started:.0f} s"
            raise EnvironmentFailure(f"the engine did not start: {why} (see {log} and {folder / 'engine.log'})")
        yield time.monotonic() - started
    finally:
        _stop(supervisor, done)


def _stop(supervisor: Supervisor, done: threading.Event) -> None:
    """Stop the supervisor and wait `stop_within_s` for it (a second Ctrl-C does not cut the wait short: the
    engine is being stopped already); past it, SIGKILL the engine's group rather than leave it."""
    supervisor.stop()
    deadline = time.monotonic() + supervisor.stop_within_s
    while not done.is_set() and time.monotonic() < deadline:
        try:
            done.wait(min(WAIT_TICK_S, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt:
            continue
    if not done.is_set():
        supervisor.kill_engine()


__all__ = ["served"]
