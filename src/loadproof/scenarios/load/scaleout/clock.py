"""Clock alignment of the scale-out workers (the package's docstring says why it holds and what it bounds):
each process's wall - monotonic offset from the tightest bracketed reading, a worker's times mapped onto
the parent's clock, and the workers' records merged in the order one process would have written them."""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from loadproof.records import RequestRecord

OFFSET_SAMPLES = 64  # bracketed wall-clock readings per offset measurement; the tightest is kept
TIME_FIELDS = ("send_ns", "first_token_ns", "last_token_ns", "end_ns", "intended_send_ns", "dispatch_ns")


class ClockOffset(msgspec.Struct, kw_only=True):
    """wall - monotonic (time_ns() - perf_counter_ns()) of one process, from the tightest bracketed reading:
    the true offset is within ceil(bracket_ns / 2) of `offset_ns`."""

    offset_ns: int
    bracket_ns: int

    @property
    def error_ns(self) -> int:
        return (self.bracket_ns + 1) // 2


def measure_offset(
    samples: int = OFFSET_SAMPLES,
    wall: Callable[[], int] = time.time_ns,
    mono: Callable[[], int] = time.perf_counter_ns,
) -> ClockOffset:
    """Read the wall clock between two monotonic readings `samples` times; keep the tightest bracket."""
    best: ClockOffset | None = None
    for _ in range(max(1, samples)):
        a = mono()
        w = wall()
        b = mono()
        if best is None or b - a < best.bracket_ns:
            best = ClockOffset(offset_ns=w - (a + b) // 2, bracket_ns=b - a)
    assert best is not None
    return best


def shift_ns(worker: ClockOffset, parent: ClockOffset) -> int:
    """What to add to a worker's monotonic time to put it on the parent's."""
    return worker.offset_ns - parent.offset_ns


def alignment_bound_ns(worker: ClockOffset, parent: ClockOffset) -> int:
    """How far a mapped time can be from the parent's clock (one wall clock assumed)."""
    return worker.error_ns + parent.error_ns


def to_worker_clock(start_wall_ns: int, clock: ClockOffset) -> int:
    """The agreed start (wall clock) on a process's monotonic clock."""
    return start_wall_ns - clock.offset_ns


def align(record: RequestRecord, shift: int) -> RequestRecord:
    """The record's times moved onto the parent's clock (a time never taken, 0 or None, stays so)."""
    for name in TIME_FIELDS:
        value = getattr(record, name)
        if value:
            setattr(record, name, value + shift)
    if record.chunk_ns:
        record.chunk_ns = [t + shift for t in record.chunk_ns]
    return record


def merge(shards: list[tuple[list[RequestRecord], int]]) -> list[RequestRecord]:
    """Every worker's records (with the shift of its clock) on the parent's clock, in order of their end,
    as one process would have appended them."""
    merged = [align(record, shift) for records, shift in shards for record in records]
    merged.sort(key=lambda r: (r.end_ns, r.batch))
    return merged
