"""Fake engine processes for the supervisor's loop, scripted on a ScriptedClock: no process, no socket,
no sleep; hours of supervision run in milliseconds."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from loadproof.errors import EngineStartCancelled, EngineStartError
from loadproof.supervisor import ScriptedClock, Supervisor, SupervisorPolicy
from loadproof.supervisor.probe import OK, ProbeResult


@dataclass
class Script:
    """One start of the engine: how long until it serves (or why it fails), then how long it lives."""

    ready_after_s: float = 1.0
    start_error: str | None = None  # raised once ready_after_s passed (an exit before readiness)
    lives_s: float | None = None  # after ready; None: until stopped
    exit_code: int = 13


class FakeEngine:
    def __init__(self, clock: ScriptedClock, pid: int, script: Script) -> None:
        self.clock = clock
        self.pid = pid
        self.script = script
        self.url = f"http://fake-{pid}"
        self.api_key: str | None = None
        self.engine = SimpleNamespace(name="fake", metric_names={})
        self.log_path = Path(f"/nonexistent/engine-{pid}.log")
        self.ready_after_s: float | None = None
        self.ready_at: float | None = None
        self.stops: list[float] = []  # the grace of every stop() call

    def wait_ready(
        self, served_name: str, timeout_s: float, status: Any = None, cancel: threading.Event | None = None
    ) -> None:
        assert cancel is not None, "the supervisor must make its readiness wait cancellable"
        wait = min(self.script.ready_after_s, timeout_s)
        if self.clock.wait(cancel, wait):
            self.stop()
            raise EngineStartCancelled("stopped while starting")
        if self.script.ready_after_s > timeout_s:
            self.stop()
            raise EngineStartError(f"engine not ready after {timeout_s:.0f} s")
        if self.script.start_error is not None:
            self.stop()
            raise EngineStartError(self.script.start_error)
        self.ready_after_s = wait
        self.ready_at = self.clock.monotonic()

    def alive(self) -> bool:
        if self.stops or self.ready_at is None:
            return False
        return self.script.lives_s is None or self.clock.monotonic() < self.ready_at + self.script.lives_s

    @property
    def returncode(self) -> int | None:
        return None if self.alive() else self.script.exit_code

    def stop(self, grace_s: float = 20.0) -> None:
        self.stops.append(grace_s)

    def kill(self) -> None:
        self.stops.append(0.0)

    def startup_report(self) -> None:
        return None

    def exit_cause(self) -> str | None:
        return None


@dataclass
class Rig:
    """A supervisor on a scripted clock, its launches, and its events."""

    clock: ScriptedClock
    supervisor: Supervisor
    launched: list[FakeEngine]
    events_path: Path
    probes: list[float] = field(default_factory=list)

    def run(self) -> str:
        return self.supervisor.run()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.events_path.read_text().splitlines()]

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events()]

    def at(self, kind: str) -> list[float]:
        """Virtual monotonic times of every event of this kind."""
        offset = self.clock.wall() - self.clock.monotonic()
        return [round(e["wall_time_s"] - offset, 3) for e in self.events() if e["kind"] == kind]


def rig(
    tmp_path: Path,
    scripts: list[Script],
    policy: SupervisorPolicy,
    *,
    probe: Callable[[FakeEngine, float], ProbeResult] | None = None,
    work: Callable[[FakeEngine, float], tuple[float, ...] | None] | None = None,
    gpus: int = 0,
    gpus_needed: int = 0,
    ready_timeout_s: float = 600.0,
    rng: Any = None,
) -> Rig:
    """`scripts[i]` drives the i-th start (the last one repeats); `probe(engine, now)` answers each liveness
    probe (OK by default); `work(engine, now)` is what the engine's /metrics show."""
    clock = ScriptedClock()
    launched: list[FakeEngine] = []
    probes: list[float] = []

    def launch() -> FakeEngine:
        engine = FakeEngine(clock, 1000 + len(launched), scripts[min(len(launched), len(scripts) - 1)])
        launched.append(engine)
        return engine

    def prober(engine: Any, served_name: str, timeout_s: float, cancel: threading.Event) -> ProbeResult:
        probes.append(clock.monotonic())
        return probe(engine, clock.monotonic()) if probe is not None else OK

    def meter(engine: Any) -> tuple[float, ...] | None:
        return work(engine, clock.monotonic()) if work is not None else None

    events_path = tmp_path / "events.jsonl"
    supervisor = Supervisor(
        launch,
        served_name="m",
        gpus_needed=gpus_needed,
        ready_timeout_s=ready_timeout_s,
        events_path=events_path,
        policy=policy,
        gpu_counter=lambda: gpus,
        clock=clock,
        prober=prober,
        work_meter=meter,
        rng=rng,
    )
    return Rig(clock, supervisor, launched, events_path, probes)
