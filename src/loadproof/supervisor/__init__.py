"""The supervisor: starts an engine from a profile and keeps it honest, or gives up loudly.

- Before every start it counts the GPUs it can see and refuses to start (or restart) with fewer than
  the profile needs: a deployment never comes back silently degraded (`gpus.py`).
- Readiness is bounded by the profile's `ready_timeout_s` (sized for model load); every way out of the
  wait but "ready" stops the engine's whole process group (`engines/process.py`).
- Liveness is a real one-token completion on an interval, with a timeout, sent with the engine's API key:
  vLLM's /health can answer 200 while the engine is hung (vLLM #36451, #17972). Its result is typed
  (`probe.py`). An exit (checked every second, whatever the probe interval), a hang (probe timeouts
  while the engine's counters stand still) or repeated probe errors lead to a restart.
- Restarts back off exponentially with jitter, capped; at most `max_restarts` within
  `restart_window_s` (the count resets after `stable_after_s` of health); past that the supervisor
  stops in the FAILED state (`policy.py`).
- `stop()` ends every wait (readiness, probe, backoff) at once, from any thread; the loop (`loop.py`)
  then stops the engine's group and returns within `stop_within_s`.
- All timing goes through an injectable clock (`clock.py`): the policy is tested on a scripted clock.
- Every event (start, ready, probe failure, exit, restart, give-up) is appended to `events.jsonl` and
  handed to `on_event` (the CLI prints it; a relay pauses on it). No event carries the API key.
"""

from loadproof.supervisor.clock import REAL_CLOCK, Clock, RealClock, ScriptedClock
from loadproof.supervisor.gpus import visible_gpus
from loadproof.supervisor.loop import FAILED, READY, RESTARTING, STARTING, STOPPED, Supervisor
from loadproof.supervisor.policy import RestartBudget, RestartDecision, SupervisorPolicy
from loadproof.supervisor.probe import ProbeOutcome, ProbeResult, engine_work, probe

__all__ = [
    "FAILED",
    "READY",
    "REAL_CLOCK",
    "RESTARTING",
    "STARTING",
    "STOPPED",
    "Clock",
    "ProbeOutcome",
    "ProbeResult",
    "RealClock",
    "RestartBudget",
    "RestartDecision",
    "ScriptedClock",
    "Supervisor",
    "SupervisorPolicy",
    "engine_work",
    "probe",
    "visible_gpus",
]
