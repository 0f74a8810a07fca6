"""One scale-out worker: its share of the schedule sent from the agreed start by the load run's own sender,
each record spooled as it ends, on this process's clock. A worker process runs it as
`python -m loadproof.scenarios.load.scaleout.worker SPOOL` (`worker_main`); a Ray task calls `run_worker`."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from loadproof.client import RequestSpec, StreamingClient
from loadproof.records import RequestRecord
from loadproof.scenarios.load.scaleout.clock import ClockOffset, measure_offset, to_worker_clock
from loadproof.scenarios.load.scaleout.protocol import (
    API_KEY_ENV,
    CLOCK,
    JOB,
    RECORDS,
    RESULT,
    WorkerJob,
    WorkerResult,
    clock_json,
)
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.load.sender import OpenLoop, raise_open_files_limit
from loadproof.store.run_dir import RunWriter


class _Progress:
    def __init__(self) -> None:
        self.recorded = self.failed = self.dispatched = 0
        self.last_offset_ns = 0
        self.late_ns = 0
        self.end_ns = 0


def run_worker(
    job: WorkerJob,
    records_dir: Path,
    api_key: str | None,
    start_wall_ns: int,
    node: str | None = None,
    on_clock: Callable[[ClockOffset, int], None] | None = None,
    stop: threading.Event | None = None,
) -> WorkerResult:
    """Send `job`'s requests on the schedule from the agreed start (wall clock), each record appended to
    `records_dir` (requests.jsonl, chunks.jsonl) as it ends, on this process's monotonic clock. `stop` set
    (from another thread) ends the run as an interrupt does: what was in flight is recorded as cancelled."""
    clock_start = measure_offset()
    start_ns = to_worker_clock(start_wall_ns, clock_start)
    if on_clock is not None:
        on_clock(clock_start, start_ns)
    progress = _Progress()
    interrupted, error = False, None
    writer = RunWriter(records_dir)
    try:
        asyncio.run(_drive(job, writer, start_ns, api_key, progress, stop))
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        writer.close()
    return WorkerResult(
        worker=job.worker,
        pid=os.getpid(),
        node=node,
        clock_start=clock_start,
        clock_end=measure_offset(),
        start_ns=start_ns,
        late_ns=progress.late_ns,
        planned=len(job.requests),
        dispatched=progress.dispatched,
        recorded=progress.recorded,
        failed=progress.failed,
        interrupted=interrupted or error is not None,
        last_intended_offset_ns=progress.last_offset_ns,
        end_ns=progress.end_ns or time.perf_counter_ns(),
        error=error,
    )


async def _drive(
    job: WorkerJob,
    writer: RunWriter,
    start_ns: int,
    api_key: str | None,
    progress: _Progress,
    stop: threading.Event | None = None,
) -> None:
    raise_open_files_limit()
    requests = [
        Planned(
            r.index,
            r.offset_ns,
            RequestSpec(request_id=r.request_id, endpoint=r.endpoint, body=r.body, deadline_s=r.deadline_s),
            r.input_tokens,
            r.output_tokens,
            r.model,
            r.media,
        )
        for r in job.requests
    ]
    cap = job.max_concurrency

    def sink(record: RequestRecord) -> None:
        writer.append(record)
        progress.recorded += 1
        progress.failed += not record.ok

    watchdog = None
    if job.parent_pid is not None or stop is not None:
        watchdog = asyncio.create_task(_watch(job.parent_pid, stop, asyncio.current_task()))
    sender = None
    try:
        async with StreamingClient(
            job.url, api_key=api_key, max_connections=cap + 4 if cap else 0, on_record=sink, keep_text=False
        ) as client:
            sender = OpenLoop(
                client,
                requests,
                max_concurrency=cap,
                scenario=job.scenario,
                worker=job.worker,
                family=job.family,
                start_ns=start_ns,
            )
            progress.late_ns = max(0, time.perf_counter_ns() - start_ns)
            await sender.run()
    finally:
        progress.end_ns = time.perf_counter_ns()
        if sender is not None:
            progress.dispatched, progress.last_offset_ns = sender.dispatched, sender.last_offset_ns
        if watchdog is not None:
            watchdog.cancel()


async def _watch(parent_pid: int | None, stop: threading.Event | None, main: asyncio.Task[Any] | None) -> None:
    """A worker whose parent is gone (killed without forwarding the interrupt), or whose stop flag is set (a
    Ray task: the parent was interrupted), stops, keeping its records."""
    while (parent_pid is None or os.getppid() == parent_pid) and (stop is None or not stop.is_set()):
        await asyncio.sleep(0.1)
    if main is not None:
        main.cancel()


def worker_main(argv: list[str]) -> int:
    """`python -m loadproof.scenarios.load.scaleout.worker SPOOL`: read SPOOL/job.msgpack, print `ready` (every
    module it needs is imported by then: this module imports them at its top), read the agreed start (wall
    ns) from stdin, run, write SPOOL/result.json. The records go to SPOOL/records/."""
    spool = Path(argv[0])
    job = msgspec.msgpack.decode((spool / JOB).read_bytes(), type=WorkerJob)
    api_key = os.environ.pop(API_KEY_ENV, "") or None
    try:
        print("ready", flush=True)
        line = sys.stdin.readline().strip()
        if not line:
            return 1  # the parent went away before the start
        start_wall_ns = int(line)

        def on_clock(clock: ClockOffset, start_ns: int) -> None:
            (spool / CLOCK).write_bytes(clock_json(clock, start_ns))

        result = run_worker(job, spool / RECORDS, api_key, start_wall_ns, on_clock=on_clock)
    except KeyboardInterrupt:
        return 130
    (spool / RESULT).write_bytes(msgspec.json.encode(result))
    return 3 if result.error else 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
