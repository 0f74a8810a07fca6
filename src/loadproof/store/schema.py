"""The schema versions of a run directory: one reader per version of each file kind, and the writer's
encoding of the current version.

A run directory's manifest records the version of every file kind (`Manifest.schema`); a manifest
without one is a version-1 run directory, the shape every run wrote before versions were recorded
(every bundle under docs/runs). Reading a file of version N goes through `READERS[kind][N]`, which
returns the current type: a later version adds its reader here and brings older rows up to date in
theirs, so old run directories keep reading. A version newer than this loadproof knows, or a row that
does not fit its type, is one RunDirError naming the file (and line).

Version 1 of each kind, and what its reader does:
- manifest.json: a JSON object; keys without a `Manifest` field go to `Manifest.extra`;
- metrics.jsonl, telemetry.jsonl, answers.jsonl: one object a line, the type's fields;
- events.jsonl: one flat object a line (`wall_time_s`, `kind`, then the event's fields); fields
  without an `Event` attribute go to `Event.fields`.

Version 2 of telemetry.jsonl adds each GPU's energy counter (`GPUSample.energy_mj`); a version-1 row
reads as it is (no counter read).

A bundle's bundle.json records its version in `format_version` (absent: 1) and is read the same way, by
`read_bundle` (`READERS["bundle"]`, rundir/bundle.py): version 1 is every bundle published so far, its
runs and series read an entry at a time so that a misfit names the entry.

The files beside run directories record their own version (`schema` in the file; absent: 1) and are read
the same way, by `read_document` (a whole file) or `read_rows` (a journal, every line of its first line's
version): a series' summary (`load_search`, `capacity_search`, `sweep`: rundir/series.py) and a tune's
journal and table (`tune_journal`, `tune_table`: rundir/tune.py), each version's reader filling what an
older file lacks; `store.series` reads and writes the files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

import msgspec

from loadproof.errors import RunDirError
from loadproof.rundir import Answer, EngineSample, Event, Manifest, TelemetrySample
from loadproof.rundir.bundle import Bundle, BundleRun, BundleSeries
from loadproof.rundir.manifest import SchemaVersions
from loadproof.rundir.series import CapacitySearch, RateSearch, Sweep
from loadproof.rundir.tune import JournalLine, TuneStarted, TuneTable

T = TypeVar("T")
Row = dict[str, Any]

_MANIFEST_FIELDS = frozenset(Manifest.__struct_fields__) - {"extra"}
_EVENT_FIELDS = frozenset(Event.__struct_fields__) - {"fields"}


def _manifest_v1(raw: Row) -> Manifest:
    extra = {k: v for k, v in raw.items() if k not in _MANIFEST_FIELDS}
    return msgspec.convert({**{k: v for k, v in raw.items() if k in _MANIFEST_FIELDS}, "extra": extra}, Manifest)


def _event_v1(row: Row) -> Event:
    fields = {k: v for k, v in row.items() if k not in _EVENT_FIELDS}
    return msgspec.convert({**{k: v for k, v in row.items() if k in _EVENT_FIELDS}, "fields": fields}, Event)


def _as(kind: type[T]) -> Callable[[Row], T]:
    return lambda row: msgspec.convert(row, kind)


# what a version-1 bundle.json may leave out: verify never read these (absent format_version: version 1)
_BUNDLE_V1_ABSENT: Row = {
    "format_version": 1,
    **dict.fromkeys(("loadproof_version", "published_wall_time", "engine_image", "raw_data")),
}


def _bundle_v1(raw: Row) -> Bundle:
    """bundle.json version 1: its runs and series read one entry at a time, so a misfit names its entry (`run 2
    ...`, counted from 1); the header fields verify never needed may be absent (None)."""
    runs, series = raw.get("runs"), raw.get("series", [])
    if not isinstance(runs, list) or not isinstance(series, list):
        raise msgspec.ValidationError("`runs` (and `series`, where given) must be lists")
    return msgspec.convert(
        {
            **_BUNDLE_V1_ABSENT,
            **raw,
            "runs": [_entry(BundleRun, entry, f"run {n}") for n, entry in enumerate(runs, 1)],
            "series": [_entry(BundleSeries, entry, f"series {n}") for n, entry in enumerate(series, 1)],
        },
        Bundle,
    )


def _entry(kind: type[T], raw: object, name: str) -> T:
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise msgspec.ValidationError(f"{name}: {exc}") from None


# --- a series' summary and a tune's files: each records its version in `schema` (absent: 1) -----------------
# (rundir/series.py and rundir/tune.py say what each version holds)


def _rate_search_v1(raw: Row) -> RateSearch:
    """A load search.json of before versions: not interrupted unless it says so; its best rate a lower bound
    where no trial above it failed or it was interrupted; no result line where it wrote none."""
    interrupted = raw.get("interrupted") is True
    bound = raw.get("max_rate_rps") is not None and (raw.get("min_failing_rate_rps") is None or interrupted)
    row = {"lower_bound": bound, "result": None, **raw, "interrupted": interrupted}
    return _rate_search_v2(row)


def _rate_search_v2(raw: Row) -> RateSearch:
    """A load search.json of before searches decided on intervals (#41): decided on the point value, one
    segment a level (its trials carry no level)."""
    row = {**raw, "decision": "point", "segments": 1, "schema": RateSearch.version}
    return msgspec.convert(row, RateSearch)


def _capacity_search_v1(raw: Row) -> CapacitySearch:
    """A capacity search.json of before versions, filled as `_rate_search_v1` fills a load search's."""
    interrupted = raw.get("interrupted") is True
    bound = raw.get("largest_pass") is not None and (raw.get("smallest_fail") is None or interrupted)
    row = {"lower_bound": bound, "result": None, **raw, "interrupted": interrupted, "schema": CapacitySearch.version}
    return msgspec.convert(row, CapacitySearch)


# the options a version-1 tune held flat, which were `run load`'s (the rest: tune's own)
_TUNE_V1_LOAD = (
    "rate",
    "duration_s",
    "input_tokens",
    "output_tokens",
    "slo",
    "attainment",
    "search_max",
    "search_resolution",
    "seed",
)


def _tune_point_v1(raw: Row) -> Row:
    """A version-1 predicted or measured point: a lower bound where its search found no failing rate."""
    bound = raw.get("max_rate_rps") is not None and raw.get("min_failing_rate_rps") is None
    return {"lower_bound": bound, **raw}


def _journal_line(row: Row) -> JournalLine:
    line: JournalLine = msgspec.convert(row, JournalLine)  # by its `kind`
    return line


def _tune_line_v1(raw: Row) -> JournalLine:
    if raw.get("kind") != "tune":
        return _journal_line(_tune_point_v1(raw))
    spec = dict(raw.get("tune") or {})
    options = dict(spec.pop("options", None) or {})
    load = {k: options[k] for k in _TUNE_V1_LOAD if k in options}
    spec.update(grid=options.get("grid", []), tokenizer=options.get("tokenizer"), load={**load, "search": "rate"})
    return msgspec.convert({"kind": "tune", "tune": spec}, TuneStarted)


def _tune_table_v1(raw: Any) -> TuneTable:
    """A version-1 tune.json: a bare list of points."""
    if not isinstance(raw, list):
        raise msgspec.ValidationError("Expected `array`, got `object`")
    points = [
        {**p, **{k: _tune_point_v1(p[k]) for k in ("predicted", "measured") if isinstance(p.get(k), dict)}}
        if isinstance(p, dict)
        else p
        for p in raw
    ]
    return msgspec.convert({"points": points}, TuneTable)


# file kind -> {version: reader of one row (or of the manifest) in that version's shape}
READERS: dict[str, dict[int, Callable[[Row], Any]]] = {
    "manifest": {1: _manifest_v1},
    "metrics": {1: _as(EngineSample)},
    "events": {1: _event_v1},
    "telemetry": {1: _as(TelemetrySample), 2: _as(TelemetrySample)},  # 2 adds GPUSample.energy_mj
    "answers": {1: _as(Answer)},
    "bundle": {1: _bundle_v1},  # a bundle's bundle.json, by its `format_version`
    "load_search": {1: _rate_search_v1, 2: _rate_search_v2, 3: _as(RateSearch)},
    "capacity_search": {1: _capacity_search_v1, 2: _as(CapacitySearch)},
    "sweep": {1: _as(Sweep)},
    "tune_journal": {1: _tune_line_v1, 2: _journal_line},
    "tune_table": {1: _tune_table_v1, 2: _as(TuneTable)},
}
CURRENT = SchemaVersions(
    manifest=Manifest.version,
    metrics=EngineSample.version,
    events=Event.version,
    telemetry=TelemetrySample.version,
    answers=Answer.version,
)


def versions_of(raw_manifest: Mapping[str, Any], where: Path) -> SchemaVersions:
    """The file kinds' versions a manifest records (all 1 when it records none)."""
    raw = raw_manifest.get("schema")
    if raw is None:
        return SchemaVersions()
    try:
        return msgspec.convert(raw, SchemaVersions)
    except msgspec.ValidationError as exc:
        raise RunDirError(f"{where}: schema is not a map of file kinds to version numbers ({exc})") from None


def reader(kind: str, version: int, where: Path) -> Callable[[Row], Any]:
    readers = READERS[kind]
    if version not in readers:
        newest = max(readers)
        if version > newest:
            raise RunDirError(
                f"{where} is schema version {version}, newer than this loadproof reads (up to "
                f"{newest}); use a newer loadproof"
            )
        raise RunDirError(f"{where}: schema version {version} is not a version of this file")
    return readers[version]


def read_manifest(raw: Mapping[str, Any], where: Path = Path("manifest.json")) -> Manifest:
    """manifest.json's object, typed by the reader of its version."""
    raw = dict(raw)
    read = reader("manifest", versions_of(raw, where).manifest, where)
    try:
        manifest: Manifest = read(raw)  # the manifest's readers each give a Manifest
        return manifest
    except msgspec.ValidationError as exc:
        raise RunDirError(f"{where} does not fit the manifest schema: {exc}") from None


def read_rows(kind: str, rows: list[Row], version: int, where: Path) -> list[Any]:
    """Rows of a JSONL file (`metrics`, `events`, `telemetry`, `answers`), typed by their version's reader."""
    read = reader(kind, version, where)
    out = []
    for number, row in enumerate(rows, 1):
        try:
            out.append(read(row))
        except msgspec.ValidationError as exc:
            raise RunDirError(f"{where}: row {number} does not fit the {kind} schema ({exc})") from None
    return out


def read_document(kind: str, raw: Any, where: Path) -> Any:
    """A whole file of its own version (`load_search`, `capacity_search`, `sweep`, `tune_table`), typed by that
    version's reader: `schema` in the object, absent (or not an object): version 1."""
    version = raw.get("schema", 1) if isinstance(raw, dict) else 1
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunDirError(f"{where}: schema {version!r} is not a version number")
    read = reader(kind, version, where)
    try:
        return read(raw)
    except msgspec.ValidationError as exc:
        raise RunDirError(f"{where} does not fit the {kind} schema: {exc}") from None


def read_bundle(raw: object, where: Path = Path("bundle.json")) -> Bundle:
    """A bundle's bundle.json, typed by the reader of its `format_version` (absent: 1); one RunDirError naming
    the file (and the entry) when it is not a bundle description this loadproof reads."""
    if not isinstance(raw, dict):
        raise RunDirError(f"{where} is not a bundle description (not a JSON object)")
    version = raw.get("format_version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunDirError(f"{where}: format_version {version!r} is not a version number")
    read = reader("bundle", version, where)
    try:
        bundle: Bundle = read(raw)  # the bundle's readers each give a Bundle
        return bundle
    except msgspec.ValidationError as exc:
        raise RunDirError(f"{where} does not fit the bundle schema: {exc}") from None


def bundle_json(bundle: Bundle) -> Row:
    """bundle.json as written (the current version)."""
    out: Row = msgspec.to_builtins(bundle)
    return out


def manifest_json(manifest: Manifest) -> Row:
    """The manifest as written (the current version): its fields, then `extra`'s keys at the top level."""
    out: Row = msgspec.to_builtins(manifest)
    extra = out.pop("extra", {})
    return {**out, **{k: v for k, v in extra.items() if k not in out}}


def event_json(event: Event) -> Row:
    """An event as written (the current version): flat, `wall_time_s` and `kind` first."""
    out: Row = msgspec.to_builtins(event)
    fields = out.pop("fields", {})
    head = {"wall_time_s": out.pop("wall_time_s", None), "kind": out.pop("kind")}
    return {
        **{k: v for k, v in head.items() if v is not None},
        **out,
        **{k: v for k, v in fields.items() if k not in out and k not in head},
    }


def typed(value: T | Mapping[str, Any], kind: type[T], read: Callable[[Row], T] | None = None) -> T:
    """`value` as `kind`: as it is when it already is one, else converted (a mapping a caller built)."""
    if isinstance(value, kind):
        return value
    return (read or _as(kind))(dict(cast(Mapping[str, Any], value)))  # not a `kind`: the mapping the signature allows


__all__ = [
    "CURRENT",
    "READERS",
    "event_json",
    "manifest_json",
    "read_document",
    "read_manifest",
    "read_rows",
    "typed",
    "versions_of",
]
