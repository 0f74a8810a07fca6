"""The files beside run directories, typed: a series' summary (`search.json` of a load or a capacity search,
`sweep.json`) and a tune's journal and table (`tune.jsonl`, `tune.json`). Each is read through the reader of
the version it records (`store.schema.READERS`, `read_document`), so a file an older loadproof wrote reads as
the current type, and written in the current version, the JSON of its type (`rundir.series`, `rundir.tune`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import RunDirError
from loadproof.rundir.series import RATE_SEARCH_KIND, SWEEP_KIND, CapacitySearch, RateSearch, Sweep
from loadproof.rundir.tune import JournalLine, TuneTable
from loadproof.store.files import read_json_file, read_regular
from loadproof.store.schema import read_document, read_rows

SEARCH_JSON = "search.json"
SWEEP_JSON = "sweep.json"
TUNE_JOURNAL = "tune.jsonl"
TUNE_TABLE = "tune.json"
MAX_BYTES = 64 * 1024**2  # a summary of thousands of trials is a few MiB


def _summary(path: Path, reader: str, what: str, kind: str | None) -> Any:
    """A series' summary: a JSON object of its `kind` (a capacity search's has none, but a parameter), typed by
    the reader of its version."""
    raw = read_json_file(path, MAX_BYTES)
    if not isinstance(raw, dict):
        raise RunDirError(f"{path} is not {what} (not a JSON object)")
    if raw.get("kind") != kind or (kind is None and "parameter" not in raw):
        raise RunDirError(f"{path} is not {what} (kind {raw.get('kind')!r})")
    return read_document(reader, raw, path)


def read_rate_search(path: Path) -> RateSearch:
    """search.json of `run load --search rate`."""
    search: RateSearch = _summary(path, "load_search", "a rate search's summary", RATE_SEARCH_KIND)
    return search


def read_capacity_search(path: Path) -> CapacitySearch:
    """search.json of `run capacity --search`."""
    search: CapacitySearch = _summary(path, "capacity_search", "a capacity search's summary", None)
    return search


def read_sweep(path: Path) -> Sweep:
    """sweep.json of `run load --sweep`."""
    sweep: Sweep = _summary(path, "sweep", "a sweep's summary", SWEEP_KIND)
    return sweep


def read_tune_table(path: Path) -> TuneTable:
    """tune.json: the tune's table."""
    table: TuneTable = read_document("tune_table", read_json_file(path, MAX_BYTES), path)
    return table


def read_tune_journal(path: Path) -> list[JournalLine]:
    """tune.jsonl's lines, each typed by the version its first line records (absent: 1). A line that does
    not parse as JSON (the last, cut short by an interrupt) is left out."""
    rows = []
    for line in read_regular(path, MAX_BYTES).decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    version = rows[0].get("schema", 1) if rows and rows[0].get("kind") == "tune" else 1
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunDirError(f"{path}: schema {version!r} is not a version number")
    return read_rows("tune_journal", rows, version, path)


def encode_line(value: msgspec.Struct) -> str:
    """One JSONL line of `value` (no newline)."""
    return msgspec.json.encode(value).decode("utf-8")


def write_document(path: Path, value: msgspec.Struct) -> None:
    """`value` as an indented JSON file, replaced atomically (a reader never sees half of it)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n")
    os.replace(tmp, path)


__all__ = [
    "SEARCH_JSON",
    "SWEEP_JSON",
    "TUNE_JOURNAL",
    "TUNE_TABLE",
    "encode_line",
    "read_capacity_search",
    "read_rate_search",
    "read_sweep",
    "read_tune_journal",
    "read_tune_table",
    "write_document",
]
