"""Writes and reads `runs/<run_id>/`.

`manifest.json` is written at the start (resolved config, versions, git hash, engine startup report,
start wall time and the clock anchor) and rewritten at the end with the end wall time. Records are
appended to `requests.jsonl` (and their chunk times to `chunks.jsonl`) and flushed as each request
ends, so an interrupted run keeps every request that finished. Quality runs also append one scored row
per item to `answers.jsonl` (ids and answers, never prompt text).

Durability against a power loss, at the points where one would cost the run: the run directory's
entry is synced when it is created; every manifest write is an atomic replace (temporary file,
flush, fsync, rename, fsync of the directory), so the manifest is always the old or the new one,
never empty; `close()` fsyncs every appended file and the directory, so a finished run is on disk.
Appends in between are flushed to the OS per request (they survive loadproof being killed) but not
fsynced: measured on a virtual disk, a flushed append of a request and its 1,024 chunk times takes
22 to 41 us, with fsync 0.6 to 1.1 ms, on the event loop that timestamps every chunk. So a power
loss mid-run loses what the kernel had not yet written back (seconds of records) and leaves a
readable run with a durable manifest and at most a torn last line per file.

What the files hold is typed in `loadproof.rundir` (the manifest, engine samples, telemetry samples,
events, answers), each with a schema version the manifest records; `store.schema` has one reader per
version, so a run directory written before versions existed (version 1) reads as one written today.

Reading (`load_run`) goes through store.files: regular files only, never a symbolic link, optional
size caps. Each JSONL file may be stored compressed, `NAME.jsonl.zst` (as `publish` writes a bundle's),
and reads the same; RunWriter writes them plain, appending. A torn last line (no newline, cut anywhere, inside a UTF-8 character too) is skipped and
counted; a bad line anywhere else, a row that is not a JSON object, or one that does not fit its type
is a RunDirError naming the file and the line.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from loadproof.errors import RunDirError
from loadproof.records import RequestRecord
from loadproof.rundir import Answer, EngineSample, Event, Manifest, TelemetrySample
from loadproof.rundir.fleet_keys import is_fleet_row
from loadproof.store.files import JSONRefused, content_path, iter_lines, parse_json, read_json_file
from loadproof.store.schema import (
    CURRENT,
    READERS,
    event_json,
    manifest_json,
    read_manifest,
    read_rows,
    typed,
    versions_of,
)

MANIFEST = "manifest.json"
REQUESTS = "requests.jsonl"
CHUNKS = "chunks.jsonl"
CLAIMS = "claims.json"
EVENTS = "events.jsonl"
METRICS = "metrics.jsonl"
TELEMETRY = "telemetry.jsonl"
ANSWERS = "answers.jsonl"

_encode = msgspec.json.Encoder().encode
_record_fields = tuple(f for f in RequestRecord.__struct_fields__ if f not in ("chunk_ns", "chunk_tokens"))


def new_run_id(scenario: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{scenario}-{stamp}-{secrets.token_hex(2)}"


class RunWriter:
    """Owns one run directory while a run is in progress."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=False)
        _fsync_dir(path.parent)  # the run directory's own entry
        self.run_id = path.name
        self._requests: IO[bytes] = open(path / REQUESTS, "ab")
        self._chunks: IO[bytes] = open(path / CHUNKS, "ab")
        self._events: IO[bytes] | None = None
        self._metrics: IO[bytes] | None = None
        self._answers: IO[bytes] | None = None
        self.num_records = 0

    @classmethod
    def create(cls, out_root: Path, scenario: str) -> RunWriter:
        return cls(out_root / new_run_id(scenario))

    def write_manifest(self, manifest: Manifest | Mapping[str, Any]) -> None:
        """Write (or replace) manifest.json, recording the current schema versions. A mapping (what the
        scenarios build) is read as a version-1 manifest first: what is written fits `Manifest`."""
        typed_manifest = typed(manifest, Manifest, READERS["manifest"][1])
        _write_json_atomic(self.path / MANIFEST, manifest_json(msgspec.structs.replace(typed_manifest, schema=CURRENT)))

    def append(self, record: RequestRecord) -> None:
        row = {name: getattr(record, name) for name in _record_fields}
        self._requests.write(_encode(row) + b"\n")
        chunks = {"request_id": record.request_id, "t_ns": record.chunk_ns, "tokens": record.chunk_tokens}
        self._chunks.write(_encode(chunks) + b"\n")
        self._chunks.flush()
        self._requests.flush()
        self.num_records += 1

    def write_event(self, event: Event) -> None:
        """A scenario event (`t_ns` on the run's monotonic clock where it matters), stamped with the wall
        time now unless it has one."""
        if self._events is None:
            self._events = open(self.path / EVENTS, "ab")
        if event.wall_time_s is None:
            event = msgspec.structs.replace(event, wall_time_s=time.time())
        self._events.write(_encode(event_json(event)) + b"\n")
        self._events.flush()

    def event(self, kind: str, **fields: Any) -> None:
        """`write_event` from keywords: `t_ns`, `evidence` and the kind's other fields."""
        self.write_event(READERS["events"][1]({"kind": kind, **fields}))

    def metric_sample(self, sample: EngineSample) -> None:
        """One engine /metrics sample, as telemetry.server_metrics' scraper takes it."""
        if self._metrics is None:
            self._metrics = open(self.path / METRICS, "ab")
        self._metrics.write(_encode(sample) + b"\n")
        self._metrics.flush()

    def answer(self, row: Answer | Mapping[str, Any]) -> None:
        """One scored quality item (ids, extracted and expected answers, verdicts; never prompt text)."""
        if self._answers is None:
            self._answers = open(self.path / ANSWERS, "ab")
        self._answers.write(_encode(typed(row, Answer)) + b"\n")
        self._answers.flush()

    def close(self) -> None:
        """Flush, fsync and close every appended file, then fsync the directory: the run is on disk."""
        for handle in (self._requests, self._chunks, self._events, self._metrics, self._answers):
            if handle is not None and not handle.closed:
                handle.flush()
                _fsync(handle.fileno())
                handle.close()
        _fsync_dir(self.path)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Run:
    """A run directory as read back: everything `report` and `verify` are allowed to use."""

    path: Path
    manifest: Manifest
    records: list[RequestRecord]
    samples: list[EngineSample] = field(default_factory=list)  # metrics.jsonl but a fleet's replica and router rows
    events: list[Event] = field(default_factory=list)
    telemetry: list[TelemetrySample] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    num_torn_lines: int = 0
    # a fleet's replica and router rows of metrics.jsonl (`rundir.fleet_keys.is_fleet_row`), kept apart so that
    # no single-engine claim reads them: the fleet's own row (`engine`) is in `samples`
    fleet_samples: list[EngineSample] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id if self.manifest.run_id is not None else self.path.name


@dataclass(frozen=True)
class ReadLimits:
    """Caps on what `load_run` reads (bytes); None is no cap, for run directories this machine wrote.
    `max_file_bytes` caps a file as stored and, for a `.zst` one, its content too (with no cap, store.files'
    MAX_DECOMPRESSED_BYTES still bounds that); `max_document_bytes` caps manifest.json and each JSONL line."""

    max_file_bytes: int | None = None
    max_document_bytes: int | None = None


class _Chunks(msgspec.Struct):
    request_id: str
    t_ns: list[int]
    tokens: list[int]


def load_run(path: Path, limits: ReadLimits = ReadLimits()) -> Run:
    if not path.is_dir():
        raise RunDirError(f"no run directory at {path}")
    try:
        raw = read_json_file(path / MANIFEST, limits.max_document_bytes)
    except FileNotFoundError:
        raise RunDirError(f"{path} is not a run directory (no {MANIFEST})") from None
    if not isinstance(raw, dict):
        raise RunDirError(f"{path / MANIFEST} is not a JSON object")
    manifest = read_manifest(raw, path / MANIFEST)
    versions = versions_of(raw, path / MANIFEST)
    rows, torn = read_jsonl(path / REQUESTS, limits)
    chunk_rows, torn_chunks = read_jsonl(path / CHUNKS, limits)
    records = _records(path, rows, chunk_rows)
    metric_rows, torn_samples = _read_typed(path / METRICS, "metrics", versions.metrics, limits)
    events, torn_events = _read_typed(path / EVENTS, "events", versions.events, limits)
    telemetry, torn_telemetry = _read_typed(path / TELEMETRY, "telemetry", versions.telemetry, limits)
    answers, torn_answers = _read_typed(path / ANSWERS, "answers", versions.answers, limits)
    return Run(
        path=path,
        manifest=manifest,
        records=records,
        samples=[s for s in metric_rows if not is_fleet_row(s.source)],
        events=events,
        telemetry=telemetry,
        answers=answers,
        num_torn_lines=torn + torn_chunks + torn_samples + torn_events + torn_telemetry + torn_answers,
        fleet_samples=[s for s in metric_rows if is_fleet_row(s.source)],
    )


def _read_typed(path: Path, kind: str, version: int, limits: ReadLimits) -> tuple[list[Any], int]:
    """A JSONL file's rows typed by the reader of its schema version, and its torn lines."""
    rows, torn = read_jsonl(path, limits)
    return read_rows(kind, rows, version, path), torn


def _records(path: Path, rows: list[dict[str, Any]], chunk_rows: list[dict[str, Any]]) -> list[RequestRecord]:
    """RequestRecords from requests.jsonl rows joined with their chunks.jsonl rows by request_id."""
    chunks: dict[str, _Chunks] = {}
    for number, row in enumerate(chunk_rows, 1):
        try:
            chunk_row = msgspec.convert(row, _Chunks)
        except msgspec.ValidationError as exc:
            raise RunDirError(f"{path / CHUNKS}: row {number} is not a chunk row ({exc})") from None
        chunks[chunk_row.request_id] = chunk_row
    records = []
    for number, row in enumerate(rows, 1):
        extra = chunks.get(row["request_id"]) if isinstance(row.get("request_id"), str) else None
        if extra is not None:
            row["chunk_ns"], row["chunk_tokens"] = extra.t_ns, extra.tokens
        try:
            records.append(msgspec.convert(row, RequestRecord))
        except msgspec.ValidationError as exc:
            raise RunDirError(f"{path / REQUESTS}: row {number} is not a request record ({exc})") from None
    return records


def read_jsonl(path: Path, limits: ReadLimits = ReadLimits()) -> tuple[list[dict[str, Any]], int]:
    """Rows of a JSONL file and how many torn lines were skipped (a missing file has none).

    The file is `path` or, compressed, `path.zst` (as a bundle stores it; both at once is a RunDirError),
    read through store.files either way. Only the last line can be torn (an append cut short leaves no
    newline, possibly in the middle of a UTF-8 character); it is skipped and counted. A line that does
    not parse anywhere else, or a row that is not a JSON object, is a RunDirError naming the file and
    the line.
    """
    rows: list[dict[str, Any]] = []
    torn = 0
    try:
        path = content_path(path)
        for number, raw, complete in iter_lines(path, limits.max_file_bytes, limits.max_document_bytes):
            if not raw.strip():
                continue
            try:
                row = parse_json(raw)
            except JSONRefused as exc:
                if not complete:
                    torn += 1  # a line cut by an interrupted write; everything before it stands
                    continue
                raise RunDirError(f"{path}: line {number}: {exc}") from None
            if not isinstance(row, dict):
                raise RunDirError(f"{path}: line {number} is not a JSON object (a {_json_type(row)})")
            rows.append(row)
    except FileNotFoundError:
        return [], 0
    return rows, torn


def _json_type(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Replace `path` so that, even across a power loss, it holds either the old or the new JSON."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False) + "\n")
        handle.flush()
        _fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    """Make a directory's entries (a new file, a rename) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def _fsync(fd: int) -> None:
    """os.fsync, where the file system offers it (some network and FUSE file systems refuse it)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise


def write_claims(path: Path, payload: dict[str, Any]) -> None:
    _write_json_atomic(path / CLAIMS, payload)
