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

Reading (`load_run`) goes through store.files: regular files only, never a symbolic link, optional
size caps. A torn last line (no newline, cut anywhere, inside a UTF-8 character too) is skipped and
counted; a bad line anywhere else, or a row that is not a JSON object, is a RunDirError naming the
file and the line.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from loadproof.errors import RunDirError
from loadproof.records import RequestRecord
from loadproof.store.files import JSONRefused, iter_lines, parse_json, read_json_file

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

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        _write_json_atomic(self.path / MANIFEST, manifest)

    def append(self, record: RequestRecord) -> None:
        row = {name: getattr(record, name) for name in _record_fields}
        self._requests.write(_encode(row) + b"\n")
        chunks = {"request_id": record.request_id, "t_ns": record.chunk_ns, "tokens": record.chunk_tokens}
        self._chunks.write(_encode(chunks) + b"\n")
        self._chunks.flush()
        self._requests.flush()
        self.num_records += 1

    def event(self, kind: str, **fields: Any) -> None:
        """A scenario or supervisor event (`t_ns` on the run's monotonic clock where it matters)."""
        if self._events is None:
            self._events = open(self.path / EVENTS, "ab")
        row = {"wall_time_s": time.time(), "kind": kind, **fields}
        self._events.write(_encode(row) + b"\n")
        self._events.flush()

    def metric_sample(self, sample: dict[str, Any]) -> None:
        """One engine /metrics sample (see telemetry.server_metrics)."""
        if self._metrics is None:
            self._metrics = open(self.path / METRICS, "ab")
        self._metrics.write(_encode(sample) + b"\n")
        self._metrics.flush()

    def answer(self, row: dict[str, Any]) -> None:
        """One scored quality item (ids, extracted and expected answers, verdicts; never prompt text)."""
        if self._answers is None:
            self._answers = open(self.path / ANSWERS, "ab")
        self._answers.write(_encode(row) + b"\n")
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
    manifest: dict[str, Any]
    records: list[RequestRecord]
    samples: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    num_torn_lines: int = 0

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id", self.path.name))


@dataclass(frozen=True)
class ReadLimits:
    """Caps on what `load_run` reads (bytes); None is no cap, for run directories this machine wrote.
    `max_document_bytes` caps manifest.json and each JSONL line."""

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
        manifest = read_json_file(path / MANIFEST, limits.max_document_bytes)
    except FileNotFoundError:
        raise RunDirError(f"{path} is not a run directory (no {MANIFEST})") from None
    if not isinstance(manifest, dict):
        raise RunDirError(f"{path / MANIFEST} is not a JSON object")
    rows, torn = read_jsonl(path / REQUESTS, limits)
    chunk_rows, torn_chunks = read_jsonl(path / CHUNKS, limits)
    records = _records(path, rows, chunk_rows)
    samples, torn_samples = read_jsonl(path / METRICS, limits)
    events, torn_events = read_jsonl(path / EVENTS, limits)
    telemetry, torn_telemetry = read_jsonl(path / TELEMETRY, limits)
    answers, torn_answers = read_jsonl(path / ANSWERS, limits)
    return Run(path=path, manifest=manifest, records=records, samples=samples, events=events, telemetry=telemetry,
               answers=answers,
               num_torn_lines=torn + torn_chunks + torn_samples + torn_events + torn_telemetry + torn_answers)


def _records(path: Path, rows: list[dict[str, Any]], chunk_rows: list[dict[str, Any]]) -> list[RequestRecord]:
    """RequestRecords from requests.jsonl rows joined with their chunks.jsonl rows by request_id."""
    chunks: dict[str, _Chunks] = {}
    for number, row in enumerate(chunk_rows, 1):
        try:
            extra = msgspec.convert(row, _Chunks)
        except msgspec.ValidationError as exc:
            raise RunDirError(f"{path / CHUNKS}: row {number} is not a chunk row ({exc})") from None
        chunks[extra.request_id] = extra
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

    Only the last line can be torn (an append cut short leaves no newline, possibly in the middle of
    a UTF-8 character); it is skipped and counted. A line that does not parse anywhere else, or a row
    that is not a JSON object, is a RunDirError naming the file and the line.
    """
    rows: list[dict[str, Any]] = []
    torn = 0
    try:
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
