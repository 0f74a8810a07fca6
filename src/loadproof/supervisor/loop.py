"""The supervision loop: count GPUs, start, wait for readiness, watch, and restart or give up.

One thread runs `Supervisor.run()`; any other thread may call `stop()`, which ends every wait of the
loop (the readiness wait, a probe in flight, the backoff) within about a second; `run()` then stops the
engine's whole process group and returns, within `stop_within_s`.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadproof.engines.process import KILL_WAIT_S, EngineProcess
from loadproof.errors import EngineStartCancelled, EngineStartError
from loadproof.supervisor.clock import REAL_CLOCK, Clock
from loadproof.supervisor.gpus import visible_gpus
from loadproof.supervisor.policy import RestartBudget, SupervisorPolicy
from loadproof.supervisor.probe import ProbeOutcome, ProbeResult, engine_work_of, probe_engine

STARTING, READY, RESTARTING, FAILED, STOPPED = "starting", "ready", "restarting", "failed", "stopped"
EXIT_CHECK_S = 1.0  # how often the engine process is checked for an exit, whatever the probe interval
# after stop(): a readiness check (two 2 s requests) or a /metrics read (5 s) in flight, before the engine's stop
STOP_SLACK_S = 10.0

Prober = Callable[[EngineProcess, str, float, threading.Event], ProbeResult]
WorkMeter = Callable[[EngineProcess], "tuple[float, ...] | None"]


class Supervisor:
    def __init__(
        self,
        launch: Callable[[], EngineProcess],
        served_name: str,
        gpus_needed: int,
        ready_timeout_s: float,
        events_path: Path,
        policy: SupervisorPolicy = SupervisorPolicy(),  # noqa: B008 (frozen, shared safely)
        on_event: Callable[[dict[str, Any]], None] | None = None,
        gpu_counter: Callable[[], int] = visible_gpus,
        rng: random.Random | None = None,
        clock: Clock = REAL_CLOCK,
        prober: Prober = probe_engine,
        work_meter: WorkMeter = engine_work_of,
    ) -> None:
        self._launch = launch
        self.served_name = served_name
        self.gpus_needed = gpus_needed
        self.ready_timeout_s = ready_timeout_s
        self.policy = policy
        self.events_path = events_path
        self.clock = clock
        self._on_event = on_event
        self._gpu_counter = gpu_counter
        self._rng = rng or random.Random()
        self._probe = prober
        self._work = work_meter
        self._stop = threading.Event()
        self.state = STOPPED
        self.engine: EngineProcess | None = None
        self.failure: str | None = None
        self.healthy_for_s = 0.0
        events_path.parent.mkdir(parents=True, exist_ok=True)

    @property
    def stop_within_s(self) -> float:
        """The longest `run()` takes to return after `stop()`: what was in flight, then the engine's stop."""
        return STOP_SLACK_S + self.policy.stop_grace_s + KILL_WAIT_S

    def event(self, kind: str, **fields: Any) -> None:
        row = {"wall_time_s": round(self.clock.wall(), 3), "kind": kind, "state": self.state, **fields}
        with open(self.events_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        if self._on_event is not None:
            self._on_event(row)

    def stop(self) -> None:
        """Ask `run()` to stop the engine and return; safe from any thread (and from a signal handler)."""
        self._stop.set()

    def kill_engine(self) -> None:
        """SIGKILL the engine's group at once: for a caller that waited `stop_within_s` in vain."""
        engine = self.engine
        if engine is not None:
            engine.kill()

    def run(self) -> str:
        """Supervise until stop() (returns STOPPED) or the restart budget is spent (returns FAILED)."""
        budget = RestartBudget(self.policy, self._rng)
        try:
            while not self._stop.is_set():
                gpus = self._gpu_counter()
                if gpus < self.gpus_needed:
                    return self._fail(
                        f"the profile needs {self.gpus_needed} GPU(s), this host shows {gpus}: "
                        "refusing to start degraded"
                    )
                reason = self._start_and_watch()
                if self._stop.is_set():
                    break
                decision = budget.decide(self.clock.monotonic(), self.healthy_for_s)
                if decision.give_up:
                    return self._fail(
                        f"{reason}; {decision.counted} restart(s) within "
                        f"{self.policy.restart_window_s:g} s already: giving up"
                    )
                self.state = RESTARTING
                self.event("restart", reason=reason, attempt=decision.attempt, delay_s=round(decision.delay_s, 2))
                if self.clock.wait(self._stop, decision.delay_s):
                    break
        finally:
            engine, self.engine = self.engine, None
            if engine is not None:
                engine.stop(grace_s=self.policy.stop_grace_s)
        self.state = STOPPED
        self.event("stopped")
        return STOPPED

    def _fail(self, why: str) -> str:
        self.state = FAILED
        self.failure = why
        self.event("give_up", reason=why)
        return FAILED

    def _start_and_watch(self) -> str:
        """Start the engine and watch it; return why it must be restarted."""
        self.state = STARTING
        self.healthy_for_s = 0.0
        try:
            engine = self.engine = self._launch()
        except OSError as exc:  # the command could not run at all (no such interpreter)
            self.event("start_failed", reason=f"cannot run the engine command: {exc}")
            return f"start failed: cannot run the engine command: {exc}"
        self.event("start", pid=engine.pid, log=str(engine.log_path))
        try:
            engine.wait_ready(self.served_name, self.ready_timeout_s, cancel=self._stop)
        except EngineStartCancelled:  # the group is stopped already
            self.engine = None
            return "stopped"
        except EngineStartError as exc:  # exited or not ready in time; wait_ready stopped the whole group
            self.engine = None
            self.event("start_failed", reason=str(exc))
            return f"start failed: {exc}"
        self.state = READY
        report = engine.startup_report()
        self.event(
            "ready",
            pid=engine.pid,
            url=engine.url,
            after_s=round(engine.ready_after_s or 0, 1),
            startup_report=report.line if report else None,
        )
        ready_at = self.clock.monotonic()
        failures = 0
        work = self._work(engine)
        # the process is watched every second whatever the probe interval: a capacity run sets the probe
        # to once an hour (it is a real request), and an engine that died must not go unseen that long
        tick = min(EXIT_CHECK_S, self.policy.probe_interval_s)
        next_probe = ready_at + self.policy.probe_interval_s
        while not self.clock.wait(self._stop, tick):
            self.healthy_for_s = self.clock.monotonic() - ready_at
            if not engine.alive():
                code = engine.returncode
                cause = engine.exit_cause()
                # said when seen, not after the stop: the leader's children may take the whole grace to go
                self.event("exit", code=code, **({"cause": cause} if cause else {}))
                # the leader is gone and its children have nothing to drain to: the short grace of a hung engine
                engine.stop(grace_s=self.policy.hung_stop_grace_s)
                self.engine = None
                return f"engine exited with code {code}: " + (cause or f"no error line in its log ({engine.log_path})")
            if self.clock.monotonic() < next_probe:
                continue
            next_probe = self.clock.monotonic() + self.policy.probe_interval_s
            before = self._work(engine)
            if work is not None and before is not None and before != work:
                # It did work since the last look: that is liveness enough, and a probe request would only
                # take a slot or a queue place from real traffic (a capacity run counts both).
                work, failures = before, 0
                continue
            result = self._probe(engine, self.served_name, self.policy.probe_timeout_s, self._stop)
            if self._stop.is_set():
                break
            work = self._work(engine)
            if result.ok:
                failures = 0
                continue
            if result.outcome is ProbeOutcome.TIMEOUT and before is not None and work is not None and work != before:
                # Unanswered, but the engine is working: the probe waits in a FIFO queue behind long
                # prefills (a capacity test's cold phase). A hung engine's counters stand still.
                self.event(
                    "probe_slow",
                    outcome=result.outcome.value,
                    reason=str(result),
                    evidence="prompt/generation counters or KV usage moved",
                )
                continue
            failures += 1
            self.event("probe_failed", outcome=result.outcome.value, reason=str(result), consecutive=failures)
            if failures >= self.policy.max_probe_failures:
                engine.stop(grace_s=self.policy.hung_stop_grace_s)
                self.engine = None
                return f"liveness probe failed {failures} times in a row ({result})"
        return "stopped"
