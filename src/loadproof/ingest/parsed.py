"""What one reader makes of another tool's file, before it becomes a run directory (`ingest.rundir`): the tool and
its version, the workload it states, its requests where it has per-request data, and the figures it states.

Times are seconds on the tool's own clock (each tool's monotonic or wall clock; only differences are used), so
a reader copies what the file says and nothing is converted twice. A `ParsedRun` is one run: a file of several
stages (inference-perf) gives one per stage.

When the run happened is the other thing a reader reads of the file (docs/import.md, "When an imported run ran"):
`started` and `ended` in UTC, from the field `dated` names, where the file states one: a Unix time (`unix_time`),
or a local time without a zone, as vLLM and AIPerf write theirs (`local_time`: read in this machine's zone, the
one the tool most likely ran in, and said so). Where the file states none, both are None and the run is dated by
its import (`rundir.source.DATED_BY_IMPORT`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from loadproof.rundir.source import StatedFigure

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)  # a date before this is no benchmark's: a field that is not a date


@dataclass(frozen=True)
class Length:
    """A token length as the tool describes its workload: fixed (a), uniform (a..b), normal (mean a, std b),
    or "" where it does not say."""

    kind: str = ""
    a: float = 0.0
    b: float = 0.0

    @property
    def text(self) -> str:
        if self.kind == "fixed":
            return f"{self.a:g}"
        return f"{self.kind}:{self.a:g}:{self.b:g}" if self.kind else "as the tool's data set"


@dataclass(frozen=True)
class Workload:
    """The load the tool says it offered."""

    arrival: str  # poisson, constant, gamma, or concurrent (a fixed number of streams, as fast as they go)
    rate_rps: float | None = None  # None: as fast as the streams (or the whole batch) go
    max_concurrency: int | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    burstiness: float = 1.0
    input_tokens: Length = Length()
    output_tokens: Length = Length()
    endpoint: str = "completions"
    ignore_eos: bool = False
    seed: int = 0


@dataclass
class Request:
    """One request as the file records it."""

    start_s: float  # sent
    end_s: float  # the answer ended (or the failure)
    ok: bool
    scheduled_s: float | None = None  # when the tool meant to send it
    first_s: float | None = None  # the first token (None: failed)
    last_s: float | None = None  # the last token
    # the arrival of each token-bearing chunk, the first token's first; [] where the file keeps no chunk times
    # (GuideLLM): TTFT, TPOT and E2EL stand, the gaps between chunks (ITL) are not known
    chunk_s: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    error: str | None = None

    @classmethod
    def streamed(cls, start_s: float, end_s: float, chunk_s: list[float], **more: object) -> Request:
        """A request whose every chunk time the file keeps: its first and last token are its first and last chunk."""
        ok = bool(chunk_s) and more.pop("ok", True) is not False
        return cls(
            start_s=start_s,
            end_s=end_s,
            ok=ok,
            first_s=chunk_s[0] if ok else None,
            last_s=chunk_s[-1] if ok else None,
            chunk_s=chunk_s if ok else [],
            **more,  # type: ignore[arg-type]  # the remaining fields, by name, as the dataclass takes them
        )


@dataclass
class ParsedRun:
    tool: str
    version: str
    file: str
    sha256: str
    workload: Workload
    model: str | None = None
    url: str | None = None
    requests: list[Request] | None = None  # None: the file has no per-request data
    stated: list[StatedFigure] = field(default_factory=list)
    part: str = ""  # "stage 1" of a multi-stage file
    started: datetime | None = None  # the run's start (UTC) as the file states it, where it does
    ended: datetime | None = None  # its end (UTC), likewise
    dated: str = ""  # the file's field(s) they were read from, and how; "" where the file states no date


def unix_time(value: object) -> datetime | None:
    """A Unix time in seconds (GuideLLM's `start_time`) in UTC; None for anything that is not a plausible one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    try:
        moment = datetime.fromtimestamp(float(value), UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment if moment >= EARLIEST else None


def local_time(text: object, layout: str | None = None) -> datetime | None:
    """A local time without a zone (`layout` for strptime, else ISO 8601) in UTC, read in this machine's zone;
    one that states its zone keeps it. None for anything that is not a plausible time."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.strptime(text, layout) if layout else datetime.fromisoformat(text)
        moment = moment.astimezone(UTC)  # a naive time is read in this machine's local zone
    except (ValueError, OverflowError, OSError):
        return None
    return moment if moment >= EARLIEST else None


def local_zone(moment: datetime) -> str:
    """This machine's zone at `moment` as its offset from UTC: `UTC+00:00`, `UTC-05:00`."""
    offset = moment.astimezone().utcoffset()
    minutes = round(offset.total_seconds() / 60) if offset is not None else 0
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
