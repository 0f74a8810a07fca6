"""The open-loop sender: each request of a schedule launched at its intended time, never waiting for a
response (`OpenLoop`), and `send_schedule`, one process sending a whole schedule with the engine's
/metrics sampled throughout (`run load`, `run replay`; with another `Sender`, the dependency-driven one of a
recorded agent, `load.chained`).

The sender sleeps on the monotonic clock until each intended time (to within `SPIN_NS`, then yields to
the event loop until it comes) and launches the request as its own task. `--max-concurrency` caps the
requests in flight with a semaphore; the wait for it shows as send lag. Each record carries its
intended send time, the moment the schedule released it (dispatch) and its actual send, so latencies
are computed from both and queueing inside the client is never hidden.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import msgspec

from loadproof.client import RequestSpec, StreamingClient
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.rundir.manifest import Schedule
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.precision import PrecisionWatch, watched
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.long_context import MetricsScenario
from loadproof.store.run_dir import RunWriter
from loadproof.units import NS_PER_S

try:
    import resource  # POSIX only: elsewhere the open-files limit stays as it is
except ImportError:
    resource = None  # type: ignore[assignment]  # POSIX only: None where the module does not exist

LEAD_NS = 20_000_000  # the schedule starts this long after the sender is ready, so offset 0 is not already late
SPIN_NS = 2_000_000  # sleep until this close to an intended time, then yield to the loop until it comes
YIELD_EVERY = 32  # while behind, let the loop run after this many sends in a row


class Sender(Protocol):
    """What `send_schedule` needs of a sender: its run, its start, how many it sent and how far it got."""

    t0: int | None
    dispatched: int
    last_offset_ns: int

    async def run(self, on_start: Callable[[int], None] | None = None) -> None: ...


class OpenLoop:
    """Sends `requests` at their intended times, each as its own task; never waits for a response."""

    def __init__(
        self,
        client: StreamingClient,
        requests: list[Planned],
        *,
        max_concurrency: int | None,
        scenario: str = "load",
        worker: int = 0,
        clock: Callable[[], int] = time.perf_counter_ns,
        sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep,
        start_ns: int | None = None,
        family: str = "synthetic",
        cut: asyncio.Event | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.cut = cut  # once set, nothing more is sent and the requests in flight are cancelled (quality's load)
        self.stop = stop  # once set, nothing more is sent and the requests in flight finish (--until-precision)
        self.sending = False  # between the first send and the schedule's end (or the stop)
        self.family = family  # what the prompts are, in each record: synthetic, dataset or trace
        self.start_ns = start_ns  # scale-out: the agreed start on this clock (default: LEAD_NS from now)
        self.client = client
        self.requests = requests
        self.max_concurrency = max_concurrency
        self.scenario = scenario
        self.worker = worker
        self.clock = clock
        self.sleep = sleep  # a test scripts time with its own clock and sleep
        self.t0: int | None = None
        self.dispatched = 0
        self.last_offset_ns = 0
        self.pending: set[asyncio.Task[Any]] = set()

    async def run(self, on_start: Callable[[int], None] | None = None) -> None:
        clock, sleep, create = self.clock, self.sleep, asyncio.create_task
        sem = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        pending = self.pending
        done = pending.discard
        cap = self.max_concurrency or 0
        t0 = self.t0 = clock() + LEAD_NS if self.start_ns is None else self.start_ns
        if on_start is not None:
            on_start(t0)
        behind = 0
        self.sending = True
        try:
            for item in self.requests:
                target = t0 + item.offset_ns
                now = clock()
                if target > now:
                    behind = 0
                    if target - now > SPIN_NS:
                        await self._until_cut(sleep((target - now - SPIN_NS) / NS_PER_S))
                    while clock() < target and not self._is_cut():
                        await sleep(0)
                else:
                    behind += 1
                    if behind % YIELD_EVERY == 0:
                        await sleep(0)
                if self._is_cut() or (self.stop is not None and self.stop.is_set()):
                    break
                record = schedule_record(item, self.scenario, self.family, cap, target, clock(), self.worker)
                task = create(stream_capped(self.client, item.spec, record, sem))
                pending.add(task)
                task.add_done_callback(done)
                self.dispatched += 1
                self.last_offset_ns = item.offset_ns
            self.sending = False
            while pending and not self._is_cut():
                await self._until_cut(asyncio.wait(set(pending)))
        finally:
            self.sending = False
            for task in pending:
                task.cancel()  # an interrupt: every stream still open is recorded as cancelled
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def _is_cut(self) -> bool:
        return self.cut is not None and self.cut.is_set()

    async def _until_cut(self, wait: Coroutine[Any, Any, Any]) -> None:
        """`wait`, ended early by the cut."""
        if self.cut is None:
            await wait
            return
        waits = {asyncio.ensure_future(wait), asyncio.ensure_future(self.cut.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()


def schedule_record(
    item: Planned, scenario: str, family: str, concurrency: int, intended_ns: int, dispatch_ns: int, worker: int = 0
) -> RequestRecord:
    """The record of a scheduled request as its sender releases it (intended and dispatch times, the plan's
    lengths, its model and media), before it is sent."""
    record = RequestRecord(
        request_id=item.spec.request_id,
        endpoint=item.spec.endpoint,
        scenario=scenario,
        family=family,
        prompt_id=f"r{item.index}",
        concurrency=concurrency,
        batch=item.index,
        intended_send_ns=intended_ns,
        dispatch_ns=dispatch_ns,
        planned_input_tokens=item.input_tokens,
        planned_output_tokens=item.output_tokens,
        worker=worker,
        model=item.model,
    )
    if item.media is not None:
        item.media.apply(record)
    return record


async def stream_capped(
    client: StreamingClient, spec: RequestSpec, record: RequestRecord, sem: asyncio.Semaphore | None
) -> None:
    """One request streamed into its record, within --max-concurrency's semaphore where there is one."""
    if sem is None:
        await client.stream(spec, record)
        return
    async with sem:
        await client.stream(spec, record)


async def send_schedule(
    scenario: MetricsScenario,
    writer: RunWriter,
    manifest: Manifest,
    live: LiveStatus,
    requests: list[Planned],
    span_s: float,
    describe: str,
    cap: int | None,
    sample_interval_s: float | None,
    family: str = "synthetic",
    check: Callable[[RequestRecord], None] | None = None,
    cut: asyncio.Event | None = None,
    sender_of: Callable[[StreamingClient], Sender] | None = None,
    watch: PrecisionWatch | None = None,
) -> None:
    """Send an open-loop schedule (run load, run replay; `sender_of`: another sender of the same requests on the
    client): the engine's metrics sampled throughout, every record appended as it ends (its answer first given
    its verdict by `check`, with --tools or --response-format: the answer's text is then kept), and how far the
    schedule got written as `schedule_end` and in the manifest, interrupted or not. With `watch`
    (--until-precision) every record is read by it too, and the open loop stops sending once it says so."""
    raise_open_files_limit()
    total = live.planned = len(requests)
    recorded = failed = 0

    def sink(record: RequestRecord) -> None:
        nonlocal recorded, failed
        if check is not None:
            check(record)
        writer.append(record)
        recorded += 1
        failed += not record.ok
        if watch is not None:
            watch.add(record)  # after requests.jsonl got it: the watch's records are the file's first ones

    def started(t0: int) -> None:
        writer.event("schedule_start", t_ns=t0, worker=0, planned=total)
        live.phase("requests", end_ns=t0 + round(span_s * NS_PER_S), detail=describe)

    target = scenario.target
    async with target.scraper(
        scenario.metric_names,
        interval_s=sample_interval_s or None,
        sink=writer.metric_sample,
    ) as scraper:
        live.watch_engine(scraper.samples)
        async with StreamingClient(
            target.url,
            api_key=target.api_key,
            max_connections=cap + 4 if cap else 0,
            on_record=live.recording(sink),
            on_start=live.started,
            keep_text=check is not None,
        ) as client:
            stop = watch.stop if watch is not None else None
            sender: Sender = (
                sender_of(client)
                if sender_of is not None
                else OpenLoop(
                    client, requests, max_concurrency=cap, scenario=scenario.name, family=family, cut=cut, stop=stop
                )
            )
            if watch is not None and isinstance(sender, OpenLoop):
                loop = sender
                watch.sending = lambda: loop.sending
            completed = False
            try:
                await watched(watch, sender.run(started))
                completed = True
            finally:
                end_ns = time.perf_counter_ns()
                reached = Schedule(
                    planned=total,
                    dispatched=sender.dispatched,
                    recorded=recorded,
                    failed=failed,
                    interrupted=not completed,
                    last_intended_offset_s=round(sender.last_offset_ns / NS_PER_S, 6),
                    elapsed_s=round((end_ns - sender.t0) / NS_PER_S, 6) if sender.t0 else 0.0,
                )
                writer.event("schedule_end", t_ns=end_ns, worker=0, **msgspec.structs.asdict(reached))
                manifest.schedule = reached
                if completed:
                    scenario.status(f"schedule: sent {sender.dispatched} of {total} requests, {failed} failed")
                else:
                    scenario.status(
                        f"schedule interrupted: sent {sender.dispatched} of {total} requests (up to "
                        f"{sender.last_offset_ns / NS_PER_S:.1f} s of {span_s:.1f} s), {recorded} recorded"
                    )


def raise_open_files_limit() -> None:
    """An open loop may hold many connections: lift the soft limit on open files to the hard one."""
    if resource is None:
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
