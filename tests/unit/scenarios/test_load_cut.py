"""The open-loop sender's cut (quality's load, once the last under-load item has ended), on a scripted clock:
it ends the sender at once, whether it was waiting to send the next request or for the last ones to finish;
the request it was waiting to send is never sent, and those in flight are cancelled there (issue #37)."""

from __future__ import annotations

import asyncio

from loadproof.scenarios.load.sender import OpenLoop
from loadproof.scenarios.quality_under_load import CutSchedule
from tests.unit.scenarios.test_load_sender import NS, FakeClient, ScriptedClock, planned


class LongGaps(ScriptedClock):
    """A sleep of more than a second lasts until something else ends it (as a long gap of a slow schedule)."""

    async def sleep(self, seconds: float) -> None:
        if seconds > 1:
            await asyncio.Event().wait()
        await super().sleep(seconds)


async def sent_then_cut(offsets: list[float], sent: int) -> tuple[OpenLoop, FakeClient, CutSchedule]:
    clock = LongGaps()
    client = FakeClient(clock, hold=asyncio.Event())  # every answer takes until it is cancelled
    schedule = CutSchedule(planned(offsets))
    loop = OpenLoop(client, schedule, max_concurrency=None, clock=clock, sleep=clock.sleep, cut=schedule.cut)  # type: ignore[arg-type]  # FakeClient stands in for StreamingClient: the same stream(), no HTTP
    run = asyncio.create_task(loop.run())
    while loop.dispatched < sent:
        await asyncio.sleep(0)  # sleep: a turn of the event loop, on a virtual clock: nothing real to wait for
    for _ in range(10):  # the sender is now waiting: for the next send, or for those in flight
        await asyncio.sleep(0)  # sleep: turns of the event loop, so that a sender not waiting would end
    assert not run.done()
    schedule.cut.set()
    await asyncio.wait_for(run, 1.0)  # at once, not at the next send or the answers' end
    return loop, client, schedule


def test_a_cut_while_waiting_to_send_sends_nothing_more_and_cancels_what_is_in_flight():
    loop, client, schedule = asyncio.run(sent_then_cut([0.0, 0.001, 60.0, 61.0], sent=2))
    assert loop.dispatched == 2 and schedule.taken == 3  # the third was taken, never sent
    assert sorted(r.request_id for r in client.records) == ["load-0", "load-1"]
    assert all(r.error_kind == "cancelled" for r in client.records)


def test_a_cut_after_the_last_send_cancels_what_is_in_flight():
    loop, client, _ = asyncio.run(sent_then_cut([0.0, 0.001], sent=2))
    assert loop.dispatched == 2 and len(client.records) == 2
    assert all(r.error_kind == "cancelled" and r.end_ns < 1_001 * NS for r in client.records)


def test_without_a_cut_the_sender_waits_for_every_answer():
    async def go() -> list[str]:
        clock = ScriptedClock()
        hold = asyncio.Event()
        client = FakeClient(clock, hold=hold)
        run = asyncio.create_task(
            OpenLoop(client, planned([0.0, 0.5]), max_concurrency=None, clock=clock, sleep=clock.sleep).run()
        )
        for _ in range(50):
            await asyncio.sleep(0)  # sleep: turns of the event loop, so that a sender not waiting would end
        assert not run.done()  # both sent, both answers awaited
        hold.set()
        await run
        return [r.error_kind or "ok" for r in client.records]

    assert asyncio.run(go()) == ["ok", "ok"]
