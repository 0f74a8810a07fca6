"""The open-loop sender on a scripted clock: it releases each request at its intended time, never waits
for a response, shows the --max-concurrency wait as send lag, and an interrupt records what was in flight.

The clock is virtual: the sender's sleeps advance it (by what was asked, plus a scripted oversleep), so
the dispatch times it records are the schedule as a perfect client would keep it, whatever the machine.
"""

from __future__ import annotations

import asyncio
import math
import statistics

import pytest

from loadproof.client import RequestSpec
from loadproof.metrics.load import load_claims
from loadproof.plans.load import LoadLengths, LoadPlan
from loadproof.records import RequestRecord
from loadproof.rundir import Event
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.load.sender import SPIN_NS, OpenLoop
from loadproof.workloads.arrivals import ArrivalSpec, intended_offsets

NS = 1_000_000_000


class ScriptedClock:
    def __init__(self, oversleep_ns: int = 0) -> None:
        self.now = 1_000 * NS
        self.oversleep_ns = oversleep_ns
        self.sleeps = 0

    def __call__(self) -> int:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        # sleep: a turn of the event loop: the tasks launched so far run while the sender sleeps (in no virtual time)
        await asyncio.sleep(0)
        self.now += max(round(seconds * NS), 100_000) + (self.oversleep_ns if seconds else 0)


class FakeClient:
    """StreamingClient.stream's contract: send_ns at the send, one record per request, also when cancelled."""

    def __init__(self, clock: ScriptedClock, hold: asyncio.Event | None = None, cost_ns: int = 0) -> None:
        self.clock = clock
        self.hold = hold
        self.cost_ns = cost_ns  # the client's own work per request, which holds up the event loop
        self.records: list[RequestRecord] = []

    async def stream(self, spec: RequestSpec, record: RequestRecord) -> RequestRecord:
        record.send_ns = self.clock()
        self.clock.now += self.cost_ns
        try:
            if self.hold is not None:
                await self.hold.wait()
            record.first_token_ns = record.last_token_ns = record.end_ns = self.clock() + NS // 10
            record.chunk_ns, record.output_tokens, record.prompt_tokens, record.ok = [record.first_token_ns], 1, 8, True
        except asyncio.CancelledError:
            record.error_kind, record.end_ns = "cancelled", self.clock()
            self.records.append(record)
            raise
        self.records.append(record)
        return record


def planned(offsets: list[float]) -> list[Planned]:
    return [
        Planned(k, round(t * NS), RequestSpec(f"load-{k}", "completions", b"{}"), 8, 1) for k, t in enumerate(offsets)
    ]


def plan(n: int) -> LoadPlan:
    lengths = LoadLengths(kind="fixed", a=8, text="8")
    return LoadPlan(
        arrival="poisson",
        rate_rps=50.0,
        seed=731,
        planned_requests=n,
        schedule_span_s=1.0,
        input_tokens=lengths,
        output_tokens=LoadLengths(kind="fixed", a=1, text="1"),
    )


def send(offsets: list[float], clock: ScriptedClock, **kwargs) -> tuple[OpenLoop, FakeClient]:
    client = FakeClient(clock, kwargs.pop("hold", None), kwargs.pop("cost_ns", 0))
    sender = OpenLoop(client, planned(offsets), clock=clock, sleep=clock.sleep, **kwargs)  # type: ignore[arg-type]  # FakeClient stands in for StreamingClient: the same stream(), no HTTP
    asyncio.run(sender.run())
    return sender, client


@pytest.mark.parametrize(("arrival", "burstiness"), [("poisson", 1.0), ("gamma", 0.5), ("gamma", 4.0)])
def test_the_sends_keep_the_schedules_mean_and_coefficient_of_variation(arrival, burstiness):
    n, rate = 10_000, 50.0
    offsets = intended_offsets(
        ArrivalSpec(arrival=arrival, rate_rps=rate, burstiness=burstiness, num_requests=n), seed=731
    )
    clock = ScriptedClock(oversleep_ns=300_000)  # every sleep wakes 0.3 ms late, as an epoll timeout may
    sender, client = send(offsets, clock, max_concurrency=None)
    records = sorted(client.records, key=lambda r: r.batch)
    assert sender.dispatched == len(records) == n
    assert [r.intended_send_ns - sender.t0 for r in records] == [round(t * NS) for t in offsets]
    lags = [r.dispatch_ns - r.intended_send_ns for r in records]
    assert min(lags) >= 0 and max(lags) < 200_000  # it spins the last SPIN_NS, so an oversleep costs nothing
    sent = [r.send_ns for r in records]
    gaps = [(b - a) / NS for a, b in zip([sender.t0, *sent], sent)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / rate, rel=0.03)
    assert statistics.pstdev(gaps) / mean == pytest.approx(1 / math.sqrt(burstiness), rel=0.04)
    claims = {c.name: c for c in load_claims(records, plan(n), [Event(kind="schedule_start", t_ns=sender.t0)], [])}
    assert claims["load.client_limited"].value is False
    assert claims["load.send_lag_s.max"].value < 1e-4
    assert claims["load.achieved_rate_rps"].value == pytest.approx(rate, rel=0.03)


def test_a_late_client_shows_as_lag_and_is_called_client_limited():
    offsets = [k / 100 for k in range(1, 2001)]  # 100/s for 20 s
    clock = ScriptedClock(oversleep_ns=0)
    # each request costs the client 12 ms where the schedule leaves 10: it falls behind, 2 ms a request
    sender, client = send(offsets, clock, max_concurrency=None, cost_ns=12_000_000)
    records = sorted(client.records, key=lambda r: r.batch)
    claims = {
        c.name: c for c in load_claims(records, plan(len(offsets)), [Event(kind="schedule_start", t_ns=sender.t0)], [])
    }
    assert claims["load.client_limited"].value is True, claims["load.client_limited"].formula
    assert claims["load.client_lag_s.max"].value > 1.0


def test_the_concurrency_cap_makes_the_queueing_explicit():
    async def main() -> tuple[OpenLoop, FakeClient]:
        clock = ScriptedClock()
        hold = asyncio.Event()
        client = FakeClient(clock, hold)
        sender = OpenLoop(
            client,  # type: ignore[arg-type]  # FakeClient stands in for StreamingClient: the same stream(), no HTTP
            planned([0.1 * k for k in range(1, 6)]),
            max_concurrency=2,
            clock=clock,
            sleep=clock.sleep,
        )
        task = asyncio.create_task(sender.run())
        while sender.dispatched < 5:
            await asyncio.sleep(0)  # sleep: a turn of the event loop, on a virtual clock: nothing real to wait for
        for _ in range(5):
            await asyncio.sleep(0)  # sleep: turns of the event loop, so that a request let through would end
        assert len(client.records) == 0  # two are sent and held, three wait for a slot
        clock.now += 2 * NS  # two seconds pass before the server lets go
        hold.set()
        await task
        return sender, client

    sender, client = asyncio.run(main())
    records = sorted(client.records, key=lambda r: r.batch)
    assert len(records) == 5 and all(r.ok for r in records)
    waits = [(r.send_ns - r.dispatch_ns) / NS for r in records]
    assert waits[:2] == [0.0, 0.0] and all(w >= 1.5 for w in waits[2:])
    claims = {
        c.name: c.value for c in load_claims(records, plan(5), [Event(kind="schedule_start", t_ns=sender.t0)], [])
    }
    assert claims["load.queue_wait_s.max"] >= 1.5 and claims["load.client_lag_s.max"] < 0.01
    assert claims["load.send_lag_s.max"] >= 1.5
    for r in records[2:]:  # answered 0.1 s after their send, but 1.5 s and more after the schedule meant them
        assert (r.first_token_ns - r.send_ns) / NS == pytest.approx(0.1)
        assert (r.first_token_ns - r.intended_send_ns) / NS >= 1.6
    assert claims["load.client_limited"] is False  # the cap held them back, not the client


def test_an_interrupt_records_every_request_in_flight_and_says_how_far_it_got():
    async def main() -> tuple[OpenLoop, FakeClient]:
        clock = ScriptedClock()
        client = FakeClient(clock, asyncio.Event())  # nothing ever completes
        sender = OpenLoop(
            client,  # type: ignore[arg-type]  # FakeClient stands in for StreamingClient: the same stream(), no HTTP
            planned([0.5 * k for k in range(1, 11)]),
            max_concurrency=None,
            clock=clock,
            sleep=clock.sleep,
        )
        task = asyncio.create_task(sender.run())
        while sender.dispatched < 4:
            await asyncio.sleep(0)  # sleep: a turn of the event loop, on a virtual clock: nothing real to wait for
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sender, client

    sender, client = asyncio.run(main())
    assert sender.dispatched == 4 and sender.last_offset_ns == 2 * NS
    assert len(client.records) == 4 and {r.error_kind for r in client.records} == {"cancelled"}


def test_spinning_is_bounded():
    assert SPIN_NS <= 2_000_000  # the sender busy-waits at most this long per request
