"""When to restart and when to give up: a pure object on a given clock reading, no I/O and no sleeping.

- Backoff: `backoff_initial_s`, doubling with each restart still inside the window, capped at
  `backoff_max_s`, then spread by +-`jitter` (so engines restarted together do not come back together).
- The restart window: a restart older than `restart_window_s` no longer counts.
- The stable period: an engine that stayed healthy for `stable_after_s` has earned a clean slate.
- At most `max_restarts` counted restarts; the next failure gives up.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass


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
    stop_grace_s: float = 20.0  # SIGTERM to SIGKILL when the supervisor stops
    hung_stop_grace_s: float = 5.0  # the same for an engine that failed its probes (it will not drain)

    def __post_init__(self) -> None:
        for name in ("probe_interval_s", "probe_timeout_s", "restart_window_s", "backoff_initial_s", "backoff_max_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 (got {getattr(self, name)})")
        for name in ("stable_after_s", "stop_grace_s", "hung_stop_grace_s", "max_restarts"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (got {getattr(self, name)})")
        if self.max_probe_failures < 1:
            raise ValueError(f"max_probe_failures must be >= 1 (got {self.max_probe_failures})")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1) (got {self.jitter})")


@dataclass(frozen=True)
class RestartDecision:
    give_up: bool
    attempt: int  # this restart's number among those counted (1 for the first); 0 when giving up
    delay_s: float  # the backoff before it; 0 when giving up
    counted: int  # restarts still counted (within the window, since the last stable period) before this one


class RestartBudget:
    def __init__(self, policy: SupervisorPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self._rng = rng or random.Random()
        self._restarts: deque[float] = deque()

    def backoff_s(self, attempt: int) -> float:
        """The delay before restart number `attempt` (1-based): doubling, capped, then jittered."""
        p = self.policy
        base: float = min(p.backoff_max_s, p.backoff_initial_s * 2 ** (attempt - 1))
        return base * (1 + p.jitter * self._rng.uniform(-1, 1))

    def decide(self, now_s: float, healthy_for_s: float) -> RestartDecision:
        """The engine just went down at `now_s` after `healthy_for_s` of health: restart (and record it), or
        give up."""
        p = self.policy
        if healthy_for_s >= p.stable_after_s:
            self._restarts.clear()  # it ran well for long enough: earlier trouble no longer counts
        while self._restarts and now_s - self._restarts[0] > p.restart_window_s:
            self._restarts.popleft()
        counted = len(self._restarts)
        if counted >= p.max_restarts:
            return RestartDecision(give_up=True, attempt=0, delay_s=0.0, counted=counted)
        self._restarts.append(now_s)
        return RestartDecision(give_up=False, attempt=counted + 1, delay_s=self.backoff_s(counted + 1), counted=counted)
