"""The supervisor: starts an engine from a profile and keeps it honest, or gives up loudly.

- Before every start it counts the GPUs it can see and refuses to start (or restart) with fewer than
  the profile needs: a deployment never comes back silently degraded.
- Readiness is bounded by the profile's `ready_timeout_s` (sized for model load).
- Liveness is a real one-token completion on an interval, with a timeout: vLLM's /health can answer
  200 while the engine is hung (vLLM #36451, #17972). An exit (checked every second, whatever the
  probe interval), a hang (probe timeouts) or repeated probe errors lead to a restart.
- Restarts back off exponentially with jitter, capped; at most `max_restarts` within
  `restart_window_s` (the count resets after `stable_after_s` of health); past that the supervisor
  stops in the FAILED state.
- Every event (start, ready, probe failure, exit, restart, give-up) is appended to `events.jsonl` and
  handed to `on_event` (the CLI prints it; a relay pauses on it).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadproof.engines.process import EngineProcess
from loadproof.errors import EngineStartError

STARTING, READY, RESTARTING, FAILED, STOPPED = "starting", "ready", "restarting", "failed", "stopped"
EXIT_CHECK_S = 1.0  # how often the engine process is checked for an exit, whatever the probe interval


@dataclass(frozen=True)
class SupervisorPolicy:
    probe_interval_s: float = 10.0
    probe_timeout_s: float = 60.0
    max_probe_failures: int = 2
    max_restarts: int = 3
    restart_window_s: float = 900.0
    stable_after_s: float = 600.0
    backoff_initial_s: float = 5.0
    backoff_max_s: float = 120.0
    jitter: float = 0.2


def visible_gpus() -> int:
    """GPUs this host shows (NVML, else `nvidia-smi -L`); 0 when neither answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no pynvml, no driver: fall back to the CLI
        pass
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def probe(url: str, model: str, timeout_s: float, api_key: str | None = None) -> str | None:
    """A real one-token completion; None when the engine answered, else why it did not."""
    body = json.dumps({"model": model, "prompt": "Hello", "max_tokens": 1, "temperature": 0}).encode()
    request = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            data = json.loads(resp.read())
        if not data.get("choices"):
            return "answer without choices"
        return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s (hung?)"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return f"no answer within {timeout_s:g} s (hung?)"
        return f"{exc.__class__.__name__}: {reason}"


def engine_work(url: str) -> tuple[float, ...] | None:
    """What the engine has done so far: its prompt and generation token counters and KV usage (these
    move while it prefills or decodes anything), or None when /metrics does not answer."""
    from loadproof.engines.vllm import VLLM_METRICS
    from loadproof.telemetry.server_metrics import parse_metrics

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=5) as resp:
            values = parse_metrics(resp.read().decode("utf-8", "replace"), VLLM_METRICS)
    except (OSError, ValueError):
        return None
    keys = ("prompt_tokens_total", "generation_tokens_total", "kv_cache_usage_perc")
    return tuple(values.get(k, -1.0) for k in keys) if any(k in values for k in keys) else None


class Supervisor:
    def __init__(self, launch: Callable[[], EngineProcess], served_name: str, gpus_needed: int,
                 ready_timeout_s: float, events_path: Path, policy: SupervisorPolicy = SupervisorPolicy(),
                 on_event: Callable[[dict[str, Any]], None] | None = None,
                 gpu_counter: Callable[[], int] = visible_gpus, rng: random.Random | None = None) -> None:
        self._launch = launch
        self.served_name = served_name
        self.gpus_needed = gpus_needed
        self.ready_timeout_s = ready_timeout_s
        self.policy = policy
        self.events_path = events_path
        self._on_event = on_event
        self._gpu_counter = gpu_counter
        self._rng = rng or random.Random()
        self._stop = threading.Event()
        self.state = STOPPED
        self.engine: EngineProcess | None = None
        self.failure: str | None = None
        self.healthy_for_s = 0.0
        events_path.parent.mkdir(parents=True, exist_ok=True)

    def event(self, kind: str, **fields: Any) -> None:
        row = {"wall_time_s": round(time.time(), 3), "kind": kind, "state": self.state, **fields}
        with open(self.events_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        if self._on_event is not None:
            self._on_event(row)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> str:
        """Supervise until stop() (returns STOPPED) or the restart budget is spent (returns FAILED)."""
        restarts: deque[float] = deque()
        try:
            while not self._stop.is_set():
                gpus = self._gpu_counter()
                if gpus < self.gpus_needed:
                    return self._fail(f"the profile needs {self.gpus_needed} GPU(s), this host shows {gpus}: "
                                      "refusing to start degraded")
                reason = self._start_and_watch()
                if self._stop.is_set():
                    break
                now = time.monotonic()
                if self.healthy_for_s >= self.policy.stable_after_s:
                    restarts.clear()  # it ran well for long enough: earlier trouble no longer counts
                while restarts and now - restarts[0] > self.policy.restart_window_s:
                    restarts.popleft()
                if len(restarts) >= self.policy.max_restarts:
                    return self._fail(f"{reason}; {len(restarts)} restart(s) within "
                                      f"{self.policy.restart_window_s:g} s already: giving up")
                restarts.append(now)
                delay = min(self.policy.backoff_max_s, self.policy.backoff_initial_s * 2 ** (len(restarts) - 1))
                delay *= 1 + self.policy.jitter * self._rng.uniform(-1, 1)
                self.state = RESTARTING
                self.event("restart", reason=reason, attempt=len(restarts), delay_s=round(delay, 2))
                if self._stop.wait(delay):
                    break
        finally:
            if self.engine is not None:
                self.engine.stop()
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
        engine = self.engine = self._launch()
        self.event("start", pid=engine.pid, log=str(engine.log_path))
        try:
            engine.wait_ready(self.served_name, self.ready_timeout_s)
        except EngineStartError as exc:
            self.engine = None
            self.event("start_failed", reason=str(exc))
            return f"start failed: {exc}"
        self.state = READY
        report = engine.startup_report()
        self.event("ready", pid=engine.pid, url=engine.url, after_s=round(engine.ready_after_s or 0, 1),
                   startup_report=report.line if report else None)
        ready_at = time.monotonic()
        failures = 0
        work = engine_work(engine.url)
        # the process is watched every second whatever the probe interval: a capacity run sets the probe
        # to once an hour (it is a real request), and an engine that died must not go unseen that long
        tick = min(EXIT_CHECK_S, self.policy.probe_interval_s)
        next_probe = ready_at + self.policy.probe_interval_s
        while not self._stop.wait(tick):
            self.healthy_for_s = time.monotonic() - ready_at
            if not engine.alive():
                code = engine.returncode
                engine.stop()
                self.engine = None
                self.event("exit", code=code)
                return f"engine exited with code {code}"
            if time.monotonic() < next_probe:
                continue
            next_probe = time.monotonic() + self.policy.probe_interval_s
            why = probe(engine.url, self.served_name, self.policy.probe_timeout_s)
            previous, work = work, engine_work(engine.url)
            if why is None:
                failures = 0
                continue
            if "hung?" in why and previous is not None and work is not None and work != previous:
                # Unanswered, but the engine is working: the probe waits in a FIFO queue behind long
                # prefills (a capacity test's cold phase). A hung engine's counters stand still.
                self.event("probe_slow", reason=why, evidence="prompt/generation counters or KV usage moved")
                continue
            failures += 1
            self.event("probe_failed", reason=why, consecutive=failures)
            if failures >= self.policy.max_probe_failures:
                engine.stop(grace_s=5.0)
                self.engine = None
                return f"liveness probe failed {failures} times in a row ({why})"
        return "stopped"
