"""The dependency-driven sender: each request sent as soon as the requests it waits for have ended and its wait
after them has passed, and never before its floor (`Chained`; `run replay --format otel`'s recorded agent).

Closed on its dependencies, open otherwise: a request with none is sent at its floor whatever the server does,
and a request waits for nothing but its own dependencies. Request i is allowed at

    max(t0 + offset_ns_i, max over its dependencies j of end_ns_j + wait_ns_i)   (no dependency: the first)

(t0: the schedule's start; `end_ns_j`: the end its record holds, whether it succeeded or failed: its answer is
not used), and its record's `intended_send_ns` is that time, so send lag is the client's delay past it.
`--max-concurrency` caps the requests in flight, its wait showing as send lag, as in the open loop
(`load.sender.OpenLoop`). Every record is handed to the client's sink as its request ends; on an interrupt the
requests in flight are cancelled (recorded as such) and those not yet allowed are never sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from loadproof.client import StreamingClient
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.load.sender import LEAD_NS, schedule_record, stream_capped
from loadproof.units import NS_PER_S


class Chained:
    """Sends `requests` (`Planned`, `offset_ns` its floor) each after its `deps` (indexes into `requests`) ended
    and `wait_ns` more passed."""

    def __init__(
        self,
        client: StreamingClient,
        requests: list[Planned],
        deps: list[list[int]],
        wait_ns: list[int],
        *,
        max_concurrency: int | None,
        scenario: str = "replay",
        family: str = "trace",
        clock: Callable[[], int] = time.perf_counter_ns,
        sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep,
    ) -> None:
        if not len(requests) == len(deps) == len(wait_ns):
            raise ValueError("one list of dependencies and one wait per request")
        self.client = client
        self.requests = requests
        self.deps = deps
        self.wait_ns = wait_ns
        self.max_concurrency = max_concurrency
        self.scenario = scenario
        self.family = family
        self.clock = clock
        self.sleep = sleep
        self.t0: int | None = None
        self.dispatched = 0
        self.last_offset_ns = 0  # the latest allowed time sent so far, after t0
        self._ends: dict[int, int] = {}
        self._done: dict[int, asyncio.Event] = {}

    async def run(self, on_start: Callable[[int], None] | None = None) -> None:
        t0 = self.t0 = self.clock() + LEAD_NS
        if on_start is not None:
            on_start(t0)
        sem = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        self._done = {item.index: asyncio.Event() for item in self.requests}
        tasks = [asyncio.create_task(self._one(t0, k, sem)) for k in range(len(self.requests))]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()  # an interrupt: every stream still open is recorded as cancelled
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, t0: int, k: int, sem: asyncio.Semaphore | None) -> None:
        item, deps = self.requests[k], self.deps[k]
        for j in deps:
            await self._done[j].wait()
        allowed = t0 + item.offset_ns
        if deps:
            allowed = max(allowed, max(self._ends[j] for j in deps) + self.wait_ns[k])
        delay = allowed - self.clock()
        if delay > 0:
            await self.sleep(delay / NS_PER_S)
        record = schedule_record(item, self.scenario, self.family, self.max_concurrency or 0, allowed, self.clock())
        self.dispatched += 1
        self.last_offset_ns = max(self.last_offset_ns, allowed - t0)
        await stream_capped(self.client, item.spec, record, sem)
        self._ends[item.index] = record.end_ns or self.clock()
        self._done[item.index].set()
