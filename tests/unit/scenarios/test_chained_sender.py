"""The dependency-driven sender on a scripted clock: each request sent once the requests it waits for ended and
its wait passed, never before its floor, its intended send that allowed time; --max-concurrency's wait shows as
send lag; an interrupt keeps every finished request and sends nothing more."""

from __future__ import annotations

import asyncio

import pytest

from loadproof.client import RequestSpec
from loadproof.scenarios.load.chained import Chained
from loadproof.scenarios.load.schedule import Planned
from tests.unit.scenarios.test_load_sender import NS, FakeClient, ScriptedClock

pytestmark = pytest.mark.timeout(30)

# a diamond (0 -> 1, 2 -> 3) and a chain with a floor (4 -> 5); request 6 alone, late
DEPS = [[], [0], [0], [1, 2], [], [4], []]
WAITS_S = [0.0, 0.5, 0.0, 0.2, 0.0, 1.0, 0.0]
FLOORS_S = [0.0, 0.0, 0.0, 0.0, 0.3, 0.0, 2.0]


def planned() -> list[Planned]:
    return [Planned(i, round(f * NS), RequestSpec(f"r{i}", "chat", b"{}"), 8, 1) for i, f in enumerate(FLOORS_S)]


def sender(client: FakeClient, clock: ScriptedClock, cap: int | None = None) -> Chained:
    return Chained(
        client,  # type: ignore[arg-type]  # the fake has StreamingClient.stream's contract
        planned(),
        DEPS,
        [round(w * NS) for w in WAITS_S],
        max_concurrency=cap,
        clock=clock,
        sleep=clock.sleep,
    )


def test_each_request_is_sent_when_its_dependencies_and_its_wait_allow():
    clock = ScriptedClock()
    client = FakeClient(clock)
    s = sender(client, clock)
    asyncio.run(s.run())
    by = {r.batch: r for r in client.records}
    assert sorted(by) == list(range(7)) and s.dispatched == 7
    assert s.t0 is not None
    for i, r in by.items():
        allowed = s.t0 + round(FLOORS_S[i] * NS)
        if DEPS[i]:
            allowed = max(allowed, max(by[j].end_ns for j in DEPS[i]) + round(WAITS_S[i] * NS))
        assert r.intended_send_ns == allowed, i
        assert r.send_ns >= allowed and all(r.send_ns >= by[j].end_ns for j in DEPS[i])
    # each answer takes 0.1 s: request 1 waits 0.5 s after 0 ends, 3 joins 1 and 2 and waits 0.2 s more
    assert by[1].intended_send_ns == by[0].end_ns + NS // 2
    assert by[3].intended_send_ns == max(by[1].end_ns, by[2].end_ns) + NS // 5
    assert by[4].intended_send_ns == s.t0 + 3 * NS // 10 and by[6].intended_send_ns == s.t0 + 2 * NS


def test_a_concurrency_cap_shows_as_send_lag_not_as_a_later_allowed_time():
    clock = ScriptedClock()
    hold = asyncio.Event()
    client = FakeClient(clock, hold=hold)

    async def go() -> None:
        task = asyncio.create_task(sender(client, clock, cap=1).run())
        for _ in range(50):
            await asyncio.sleep(0)  # sleep: yields the loop to the sender, no time passes (a scripted clock)
        hold.set()
        await task

    asyncio.run(go())
    by = {r.batch: r for r in client.records}
    assert len(by) == 7 and sum(r.send_ns > r.intended_send_ns for r in by.values()) >= 1
    assert all(r.dispatch_ns is not None and r.send_ns >= r.dispatch_ns for r in by.values())


def test_an_interrupt_keeps_what_finished_and_sends_nothing_more():
    clock = ScriptedClock()
    hold = asyncio.Event()
    client = FakeClient(clock, hold=hold)

    async def go() -> None:
        task = asyncio.create_task(sender(client, clock).run())
        for _ in range(50):
            await asyncio.sleep(0)  # sleep: yields the loop to the sender, no time passes (a scripted clock)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    # requests 0 and 4 (no dependency, floors 0 and 0.3 s) and 6 (floor 2 s) were in flight: cancelled, recorded
    assert sorted(r.batch for r in client.records) == [0, 4, 6]
    assert all(r.error_kind == "cancelled" for r in client.records)


def test_one_list_of_dependencies_and_one_wait_per_request():
    clock = ScriptedClock()
    with pytest.raises(ValueError, match="one list"):
        Chained(FakeClient(clock), planned(), DEPS[:3], [0] * 7, max_concurrency=None)  # type: ignore[arg-type]  # the fake's contract
