"""Bounded polls for tests: wait for a condition up to a deadline, never a fixed sleep before an assert.

`wait_until(condition, within_s, what)` calls `condition` until it returns something truthy and returns
that; past `within_s` it fails with `what` (a string, or a function giving one when it fails, to show the
state then) and the last value seen. `eventually` is the same for a test on an event loop, and `condition`
may then be a coroutine function. `poll` and `poll_async` wait the same way but do not fail: past
`within_s` they return the last (falsy) value, for a caller that decides itself what a timeout means (a
fake server that stays silent until its client leaves or its time is up, a start that cleans up first).
A condition may raise (an `assert` that the process waited on still runs) to end the wait at once.

A fixed sleep is either too short on a busy machine (a flaky failure) or too long everywhere (a slow
suite); a poll is as fast as the thing it waits for and fails only when that thing never happens. This is
the one place in tests/ that computes a deadline: tests/unit/test_test_waits.py refuses one anywhere else,
and a sleep without a `# sleep:` comment saying why it is not a wait.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
EVERY_S = 0.02
What = str | Callable[[], str]


def poll(condition: Callable[[], T], within_s: float, every_s: float = EVERY_S) -> T:
    """`condition`'s first truthy value, or its last value once `within_s` passed."""
    deadline = time.monotonic() + within_s
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every_s)


async def poll_async(condition: Callable[[], T | Awaitable[T]], within_s: float, every_s: float = EVERY_S) -> T:
    """`poll` on an event loop: `condition` may be a coroutine function; the loop runs between calls."""
    deadline = time.monotonic() + within_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value or time.monotonic() >= deadline:
            return value
        await asyncio.sleep(every_s)


def ready_while_running(
    ready: Callable[[], object], proc: subprocess.Popen[Any], within_s: float, every_s: float = EVERY_S
) -> bool:
    """Whether `ready()` came true within `within_s`; the wait ends at once if `proc` exits first (a server
    that died at start), for a caller that stops what it started before it fails."""
    poll(lambda: proc.poll() is not None or ready(), within_s, every_s)
    return bool(ready())


def _failed(what: What, within_s: float, value: object) -> AssertionError:
    said = what() if callable(what) else what
    return AssertionError(f"{said}: not within {within_s:g} s (last: {value!r})")


def wait_until(condition: Callable[[], T], within_s: float, what: What, every_s: float = EVERY_S) -> T:
    value = poll(condition, within_s, every_s)
    if not value:
        raise _failed(what, within_s, value)
    return value


async def eventually(
    condition: Callable[[], T | Awaitable[T]], within_s: float, what: What, every_s: float = EVERY_S
) -> T:
    value = await poll_async(condition, within_s, every_s)
    if not value:
        raise _failed(what, within_s, value)
    return value


async def largest_while(
    task: asyncio.Future[object], read: Callable[[], Awaitable[float]], every_s: float = 0.05
) -> float:
    """The largest value `read` gave while `task` ran (read at least once): what a gauge held during it,
    without guessing when to look."""
    largest = await read()
    while not task.done():
        await asyncio.wait([task], timeout=every_s)
        if not task.done():
            largest = max(largest, await read())
    return largest
