"""Bounded polls for tests: wait for a condition up to a deadline, never a fixed sleep before an assert.

`wait_until(condition, within_s, what)` calls `condition` until it returns something truthy and returns
that; past `within_s` it fails with `what` and the last value seen. `eventually` is the same for a test on
an event loop, and `condition` may then be a coroutine function. A fixed sleep is either too short on a
busy machine (a flaky failure) or too long everywhere (a slow suite); a poll is as fast as the thing it
waits for and fails only when that thing never happens.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
EVERY_S = 0.02


def wait_until(condition: Callable[[], T], within_s: float, what: str, every_s: float = EVERY_S) -> T:
    deadline = time.monotonic() + within_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {within_s:g} s (last: {value!r})")
        time.sleep(every_s)


async def eventually(
    condition: Callable[[], T | Awaitable[T]], within_s: float, what: str, every_s: float = EVERY_S
) -> T:
    deadline = time.monotonic() + within_s
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {within_s:g} s (last: {value!r})")
        await asyncio.sleep(every_s)


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
