"""Time for the supervisor: the real clock, and a scripted one on which a test runs hours of policy at once.

Everything the supervisor times (backoff, the restart window, the stable period, probe intervals, event
timestamps) goes through a Clock, so the policy is tested on virtual time, in milliseconds, with the
same loop that runs in production.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (intervals, deadlines)."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch (event timestamps)."""
        ...

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Block until `event` is set or `timeout_s` passed; True when the event is set."""
        ...


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        return event.wait(timeout_s)


REAL_CLOCK = RealClock()


class ScriptedClock:
    """Virtual time that moves only when someone waits (or calls `advance`): a 120 s wait returns at once
    with the clock 120 s later, after running, in time order, every action scheduled in between with
    `at()` or `after()`. An action that sets the awaited event ends the wait at the action's time.
    One thread only: it is for tests and simulations, not for sharing."""

    def __init__(self, start_s: float = 1000.0, wall_start_s: float = 1_700_000_000.0) -> None:
        self._now = start_s
        self._wall_offset = wall_start_s - start_s
        self._actions: list[tuple[float, int, Callable[[], object]]] = []
        self._seq = 0

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def at(self, when_s: float, action: Callable[[], object]) -> None:
        heapq.heappush(self._actions, (when_s, self._seq, action))
        self._seq += 1

    def after(self, delay_s: float, action: Callable[[], object]) -> None:
        self.at(self._now + delay_s, action)

    def advance(self, delay_s: float) -> None:
        self._run_until(self._now + delay_s, None)

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        if not event.is_set():
            self._run_until(self._now + timeout_s, event)
        return event.is_set()

    def _run_until(self, until_s: float, event: threading.Event | None) -> None:
        while self._actions and self._actions[0][0] <= until_s:
            when, _, action = heapq.heappop(self._actions)
            self._now = max(self._now, when)
            action()
            if event is not None and event.is_set():
                return
        self._now = max(self._now, until_s)
