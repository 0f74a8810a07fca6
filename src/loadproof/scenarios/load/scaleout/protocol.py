"""What a scale-out worker gets and gives back, in its spool folder (`SPOOL/w<k>` inside the run directory):

- `job.msgpack`: its `WorkerJob` (its share of the schedule, every body built; the API key travels in the
  environment, never in a file);
- `clock.json`: its clock offset and the agreed start on its clock, written as it starts (`SpooledClock`);
- `records/requests.jsonl`, `records/chunks.jsonl`: its records as they end, on its own clock;
- `result.json`: its `WorkerResult`, when it ends.

A Ray task writes the same files on its node and sends their bytes back; the parent reads them here.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from loadproof.records import MediaCounts, RequestRecord
from loadproof.scenarios.load.scaleout.clock import ClockOffset, align
from loadproof.scenarios.load.schedule import Planned
from loadproof.store.run_dir import CHUNKS, REQUESTS, read_jsonl

if TYPE_CHECKING:
    from loadproof.scenarios.live import LiveStatus

READY_TIMEOUT_S = 120.0  # a worker process or Ray task imports loadproof and loads its job within this
STOP_TIMEOUT_S = 30.0  # after an interrupt, a worker records what was in flight within this
API_KEY_ENV = "LOADPROOF_WORKER_API_KEY"  # the API key reaches a worker process here, never on its command line
JOB, CLOCK, RECORDS, RESULT = "job.msgpack", "clock.json", "records", "result.json"


class JobRequest(msgspec.Struct, array_like=True):
    index: int
    offset_ns: int
    request_id: str
    endpoint: str
    body: bytes
    deadline_s: float | None
    input_tokens: int | None
    output_tokens: int
    model: str = ""  # --model-mix: the model its body asks for (the record keeps it)
    media: MediaCounts | None = None  # the media it carries (the record keeps their counts)


class WorkerJob(msgspec.Struct, kw_only=True):
    worker: int
    url: str
    max_concurrency: int | None
    requests: list[JobRequest]
    scenario: str = "load"
    parent_pid: int | None = None  # a worker process stops when its parent is gone
    family: str = "synthetic"  # what the prompts are (each record's family)


class WorkerResult(msgspec.Struct, kw_only=True):
    worker: int
    pid: int
    node: str | None = None  # the Ray node id
    clock_start: ClockOffset
    clock_end: ClockOffset | None = None
    start_ns: int  # the agreed start on the worker's clock
    late_ns: int = 0  # how far past the start the worker was when its sender began (0: waited for it)
    planned: int
    dispatched: int = 0
    recorded: int = 0
    failed: int = 0
    interrupted: bool = False
    last_intended_offset_ns: int = 0
    end_ns: int = 0  # the worker's clock
    error: str | None = None


def job_of(
    worker: int, url: str, requests: list[Planned], cap: int | None, parent_pid: int | None, family: str = "synthetic"
) -> WorkerJob:
    return WorkerJob(
        worker=worker,
        url=url,
        max_concurrency=cap,
        parent_pid=parent_pid,
        family=family,
        requests=[
            JobRequest(
                p.index,
                p.offset_ns,
                p.spec.request_id,
                p.spec.endpoint,
                p.spec.body,
                p.spec.deadline_s,
                p.input_tokens,
                p.output_tokens,
                p.model,
                p.media,
            )
            for p in requests
        ],
    )


encode = msgspec.msgpack.Encoder().encode


class SpooledClock(msgspec.Struct):
    """`clock.json`: a worker's clock as it started, and the agreed start on that clock."""

    clock_start: ClockOffset
    start_ns: int


def clock_json(clock: ClockOffset, start_ns: int) -> bytes:
    return msgspec.json.encode(SpooledClock(clock_start=clock, start_ns=start_ns))


def spooled_clock(spool: Path) -> ClockOffset | None:
    """The clock a worker wrote when it started (None: it wrote none, or not yet)."""
    try:
        return msgspec.json.decode((spool / CLOCK).read_bytes(), type=SpooledClock).clock_start
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def result_of(spool: Path) -> WorkerResult | None:
    try:
        return msgspec.json.decode((spool / RESULT).read_bytes(), type=WorkerResult)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def read_spool(path: Path) -> list[RequestRecord]:
    """A worker's records (its requests.jsonl joined with its chunks.jsonl), on its own clock."""
    rows, _ = read_jsonl(path / REQUESTS)
    chunk_rows, _ = read_jsonl(path / CHUNKS)
    chunks = {row.get("request_id"): row for row in chunk_rows}
    records = []
    for row in rows:
        extra = chunks.get(row.get("request_id"))
        if extra is not None:
            row["chunk_ns"], row["chunk_tokens"] = extra.get("t_ns", []), extra.get("tokens", [])
        records.append(msgspec.convert(row, RequestRecord))
    return records


class Tail:
    """New complete lines of a worker's requests.jsonl, for the live view (times moved onto the parent's)."""

    def __init__(self, spool: Path) -> None:
        self.spool = spool
        self.pos = 0
        self.rest = b""
        self.shift: int | None = None

    def poll(self, parent: ClockOffset) -> list[RequestRecord]:
        if self.shift is None:
            clock = spooled_clock(self.spool)
            if clock is None:
                return []
            self.shift = clock.offset_ns - parent.offset_ns
        try:
            with open(self.spool / RECORDS / REQUESTS, "rb") as handle:
                handle.seek(self.pos)
                data = handle.read()
        except OSError:
            return []
        self.pos += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        out = []
        for line in lines:
            with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
                out.append(align(msgspec.json.decode(line, type=RequestRecord), self.shift))
        return out


def show(live: LiveStatus, tails: list[Tail], parent: ClockOffset) -> None:
    """The workers' newly ended requests, into the parent's live view."""
    for tail in tails:
        for record in tail.poll(parent):
            live.started(record)
            live.ended(record)
