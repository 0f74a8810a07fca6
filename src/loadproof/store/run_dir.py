"""Writes and reads `runs/<run_id>/`.

`manifest.json` is written at the start (resolved config, versions, git hash, engine startup report,
start wall time and the clock anchor) and rewritten at the end with the end wall time. Records are
appended to `requests.jsonl` (and their chunk times to `chunks.jsonl`) and flushed as each request
ends, so an interrupted run keeps every request that finished. Quality runs also append one scored row
per item to `answers.jsonl` (ids and answers, never prompt text). Reading tolerates a torn last line.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from loadproof.client.record import RequestRecord
from loadproof.errors import RunDirError

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
        for handle in (self._requests, self._chunks, self._events, self._metrics, self._answers):
            if handle is not None:
                handle.close()

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


def load_run(path: Path) -> Run:
    if not path.is_dir():
        raise RunDirError(f"no run directory at {path}")
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise RunDirError(f"{path} is not a run directory (no {MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{manifest_path} is not valid JSON: {exc}") from None
    rows, torn = read_jsonl(path / REQUESTS)
    chunk_rows, torn_chunks = read_jsonl(path / CHUNKS)
    chunks = {row["request_id"]: row for row in chunk_rows}
    records = []
    for row in rows:
        extra = chunks.get(row["request_id"])
        if extra is not None:
            row["chunk_ns"], row["chunk_tokens"] = extra["t_ns"], extra["tokens"]
        records.append(msgspec.convert(row, RequestRecord))
    samples, torn_samples = read_jsonl(path / METRICS)
    events, torn_events = read_jsonl(path / EVENTS)
    telemetry, torn_telemetry = read_jsonl(path / TELEMETRY)
    answers, torn_answers = read_jsonl(path / ANSWERS)
    return Run(path=path, manifest=manifest, records=records, samples=samples, events=events, telemetry=telemetry,
               answers=answers,
               num_torn_lines=torn + torn_chunks + torn_samples + torn_events + torn_telemetry + torn_answers)


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Rows of a JSONL file and how many torn lines were skipped (a missing file has none)."""
    if not path.is_file():
        return [], 0
    rows, torn = [], 0
    with open(path, "rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                torn += 1  # a line cut by an interrupted write; everything before it stands
    return rows, torn


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_claims(path: Path, payload: dict[str, Any]) -> None:
    _write_json_atomic(path / CLAIMS, payload)
