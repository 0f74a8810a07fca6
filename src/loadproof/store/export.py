"""`loadproof export`: a run directory as tables, CSV or Parquet, for pandas, DuckDB and the like. A published
run (a bundle's `runs/<run_id>/`, records compressed as `NAME.jsonl.zst`) exports the same: `load_run` reads both.

One file per kind of data, plus `export.json` (written last, so its presence means the export is
complete) listing every table, its file, its row count and its columns with type and unit:

- `requests`: one row per request, every RequestRecord field but the chunk lists, then two derived
  columns, `ttft_ns` and `latency_ns` (exactly `RequestRecord.ttft_ns` and `.latency_ns`);
- `chunks`: one row per token-bearing chunk (request_id, chunk_index, t_ns, tokens);
- `metrics`: the engine's /metrics samples, long: one row per sample and metric (t_ns, wall_time_s,
  metric, value);
- `events`: t_ns, wall_time_s, kind, and every other field as one JSON object (`fields`);
- `telemetry_host`: one row per telemetry sample, the host's fields as columns (and the sample's NVML
  Xid events, if any, as JSON);
- `telemetry_gpu`: one row per telemetry sample and GPU, with the GPU's index in `gpu`; a run
  without GPU telemetry has none;
- `answers`: one row per scored quality item, only when the run has answers.jsonl rows;
- `claims` (the command adds it, `report.claims_table`, through `export_run`'s `more`): one row per claim, with
  its 95% interval's low, high, confidence and method.

Times stay as the run stored them: `t_ns` and every `*_ns` time point are integer nanoseconds on the
run's monotonic clock (perf_counter_ns; comparable within one run only, placed in real time by the
manifest's `clock_anchor`, copied into export.json); `wall_time_s` is Unix time in seconds.

Types: int64, float64, bool, string, and json (a string column holding JSON text: nested values).
Every column's type is fixed: the field's type in the run directory's types (`loadproof.rundir`,
`RequestRecord`), so every run's tables have the same columns, GPU or not. In CSV a null is an empty
cell and a bool is `true`/`false`; Parquet keeps nulls apart from empty strings. Rows are streamed: CSV row by row, Parquet in batches of `BATCH_ROWS` through
pyarrow's ParquetWriter (the optional extra `loadproof[parquet]`), so only the run itself, as
`load_run` reads it, is held in memory.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import UsageError
from loadproof.records import RequestRecord
from loadproof.rundir import Answer
from loadproof.rundir.telemetry_sample import GPUSample, HostSample
from loadproof.store.export_table import (
    BATCH_ROWS,
    BOOL,
    FLOAT,
    INT,
    JSON,
    STR,
    Column,
    Table,
    write_csv,
    write_parquet,
)
from loadproof.store.run_dir import Run, load_run

FORMATS = ("csv", "parquet")
EXPORT_MANIFEST = "export.json"
PARQUET_INSTALL = "pip install 'loadproof[parquet]'"
T_NS = "ns, run clock"  # a time point on the run's monotonic clock (perf_counter_ns)
DURATION_NS = "ns"
WALL_S = "s, Unix time"
TIME_NOTE = (
    "t_ns and the *_ns time points of requests are integer nanoseconds on the run's monotonic clock "
    "(perf_counter_ns), comparable within this run only; in wall-clock nanoseconds a time point is "
    "clock_anchor.wall_time_ns + (t_ns - clock_anchor.perf_counter_ns). wall_time_s is Unix time in "
    "seconds, read when the row was written. ttft_ns and latency_ns are durations in nanoseconds."
)
TYPES_NOTE = (
    "int64, float64, bool, string; json is a string column holding JSON text. In CSV a null is an "
    "empty cell and a bool is true or false."
)


@dataclass
class TableFile:
    """One table as written."""

    name: str
    file: str
    description: str
    columns: list[Column]
    rows: int

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.file,
            "rows": self.rows,
            "description": self.description,
            "columns": [c.describe() for c in self.columns],
        }


@dataclass
class Export:
    path: Path
    format: str
    tables: list[TableFile] = field(default_factory=list)
    num_torn_lines: int = 0


def check_format(fmt: str) -> None:
    """UsageError unless `fmt` is a format this machine can write (Parquet needs pyarrow)."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be csv or parquet (got {fmt!r})")
    if fmt == "parquet":
        try:
            import pyarrow  # optional: loadproof[parquet]; the pure side must not need it
            import pyarrow.parquet  # noqa: F401 (imported to learn that it is there: the writer imports it again)
        except ImportError:
            raise UsageError(f"--format parquet needs pyarrow: {PARQUET_INSTALL}") from None


def export_run(run_dir: Path, out: Path, fmt: str = "csv", more: Callable[[Run], list[Table]] | None = None) -> Export:
    """Write the tables of the run at `run_dir` into `out` (created; if it exists it must be empty); `more`
    gives tables a higher layer derives from the run (its claims: report/claims_table.py), written after the
    run's own."""
    check_format(fmt)
    run = load_run(run_dir)
    created = _prepare_out(out)
    result = Export(path=out, format=fmt, num_torn_lines=run.num_torn_lines)
    written: list[Path] = []
    try:
        for table in tables(run) + (more(run) if more is not None else []):
            path = out / f"{table.name}.{fmt}"
            written.append(path)
            count = (write_csv if fmt == "csv" else write_parquet)(path, table)
            result.tables.append(TableFile(table.name, path.name, table.description, table.columns, count))
        written.append(out / EXPORT_MANIFEST)
        with open(out / EXPORT_MANIFEST, "x", encoding="utf-8") as handle:
            json.dump(_manifest(run, result), handle, indent=2, ensure_ascii=False)
            handle.write("\n")
    except BaseException:
        for path in written:  # leave no half export behind: the folder was empty
            path.unlink(missing_ok=True)
        if created:
            out.rmdir()
        raise
    return result


def _prepare_out(out: Path) -> bool:
    """Create `out`, or accept it when it is an empty folder; True when it was created here."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UsageError(f"--out {out} exists and is not a folder")
    if out.is_dir():
        if any(out.iterdir()):
            raise UsageError(f"--out {out} is not empty; give a new or empty folder")
        return False
    try:
        out.mkdir(parents=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {out}: {exc.strerror or exc}") from None
    return True


def _manifest(run: Run, result: Export) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "scenario": run.manifest.scenario,
        "format": result.format,
        "clock_anchor": msgspec.to_builtins(run.manifest.clock_anchor),
        "times": TIME_NOTE,
        "types": TYPES_NOTE,
        "num_torn_lines_skipped": run.num_torn_lines,
        "tables": [t.describe() for t in result.tables],
    }


# ---------------------------------------------------------------------------------------------- tables


def tables(run: Run) -> list[Table]:
    """The tables of a run, in the order they are written."""
    out = [_requests(run), _chunks(run), _metrics(run), _events(run), *_telemetry(run)]
    if run.answers:
        out.append(_answers(run))
    return out


def _requests(run: Run) -> Table:
    info = msgspec.inspect.type_info(RequestRecord)
    assert isinstance(info, msgspec.inspect.StructType)
    names = [f.name for f in info.fields if f.name not in ("chunk_ns", "chunk_tokens", "tool_calls")]
    columns = [
        Column(f.name, _struct_type("RequestRecord", f.name, f.type), _request_unit(f.name))
        for f in info.fields
        if f.name in names
    ]
    columns += [
        Column(
            "ttft_ns",
            INT,
            DURATION_NS,
            "time to first token; null without a first token",
            derived="first_token_ns - send_ns",
        ),
        Column(
            "latency_ns",
            INT,
            DURATION_NS,
            "send to last token; null without a last token",
            derived="last_token_ns - send_ns",
        ),
        Column(
            "tool_calls", STR, None, "the answer's tool calls, a JSON array of {name, arguments, id}; null without one"
        ),
    ]

    def rows() -> Iterator[list[Any]]:  # load_run validated every field against RequestRecord
        for record in run.records:
            calls = msgspec.json.encode(record.tool_calls).decode() if record.tool_calls else None
            yield [*(getattr(record, name) for name in names), record.ttft_ns, record.latency_ns, calls]

    return Table("requests", "one row per request (requests.jsonl); times are ns on the run clock", columns, rows)


def _struct_type(struct: str, name: str, t: Any) -> str:
    """The column type of a struct's field (`X | None` is a nullable X)."""
    mi = msgspec.inspect
    if isinstance(t, mi.UnionType):
        inner = [x for x in t.types if not isinstance(x, mi.NoneType)]
        if len(inner) == 1:
            t = inner[0]
    for kind, column_type in ((mi.BoolType, BOOL), (mi.IntType, INT), (mi.FloatType, FLOAT), (mi.StrType, STR)):
        if isinstance(t, kind):
            return column_type
    raise TypeError(f"{struct}.{name} has a type export does not map to a column: {t!r}")


def _request_unit(name: str) -> str | None:
    if name.endswith("_ns"):
        return T_NS
    if name.endswith("_tokens"):
        return "tokens"
    if name in ("num_chunks", "num_heartbeats"):
        return "count"
    return None


def _chunks(run: Run) -> Table:
    columns = [
        Column("request_id", STR),
        Column("chunk_index", INT, None, "0-based position in the request"),
        Column("t_ns", INT, T_NS, "arrival of the chunk"),
        Column("tokens", INT, "tokens", "tokens the chunk added (0 without per-chunk usage)"),
    ]

    def rows() -> Iterator[list[Any]]:
        for record in run.records:
            rid = record.request_id
            for index, (t_ns, tokens) in enumerate(itertools.zip_longest(record.chunk_ns, record.chunk_tokens)):
                yield [rid, index, t_ns, tokens]

    def column_batches() -> Iterator[list[list[Any]]]:
        ids: list[str] = []
        indexes: list[int] = []
        times: list[int | None] = []
        tokens: list[int | None] = []
        for record in run.records:
            times_, tokens_ = record.chunk_ns, record.chunk_tokens
            n = max(len(times_), len(tokens_))
            ids.extend(itertools.repeat(record.request_id, n))
            indexes.extend(range(n))
            times.extend(times_ if len(times_) == n else [*times_, *[None] * (n - len(times_))])
            tokens.extend(tokens_ if len(tokens_) == n else [*tokens_, *[None] * (n - len(tokens_))])
            if len(ids) >= BATCH_ROWS:
                yield [ids, indexes, times, tokens]
                ids, indexes, times, tokens = [], [], [], []
        if ids:
            yield [ids, indexes, times, tokens]

    return Table("chunks", "one row per token-bearing chunk (chunks.jsonl), long format", columns, rows, column_batches)


def _metrics(run: Run) -> Table:
    columns = [
        Column("t_ns", INT, T_NS, "when the scrape started"),
        Column("wall_time_s", FLOAT, WALL_S),
        Column("metric", STR, None, "loadproof's name for the engine metric"),
        Column("value", FLOAT, None, "the metric's value in that sample (counters are cumulative)"),
        Column(
            "source",
            STR,
            None,
            "whose /metrics (null: the engine's; soak: engine or relay; a fleet: replica-<i>, router, engine)",
        ),
    ]

    def rows() -> Iterator[list[Any]]:
        for sample in [*run.samples, *run.fleet_samples]:  # a fleet's replica and router rows after the rest
            for name, value in sample.values.items():
                yield [sample.t_ns, sample.wall_time_s, name, value, sample.source]

    return Table(
        "metrics", "the engine's /metrics samples (metrics.jsonl), long: one row per sample and metric", columns, rows
    )


def _events(run: Run) -> Table:
    columns = [
        Column("t_ns", INT, T_NS, "null for events stored without one"),
        Column("wall_time_s", FLOAT, WALL_S),
        Column("kind", STR),
        Column("fields", JSON, None, "every other field of the event, as one JSON object"),
    ]

    def rows() -> Iterator[list[Any]]:
        for event in run.events:
            rest = {**({} if event.evidence is None else {"evidence": event.evidence}), **event.fields}
            yield [event.t_ns, event.wall_time_s, event.kind, _json(rest)]

    return Table("events", "scenario and supervisor events (events.jsonl)", columns, rows)


_UNIT_SUFFIXES = (
    ("_bytes", "bytes"),
    ("_pct", "%"),
    ("_w", "W"),
    ("_c", "degrees C"),
    ("_mhz", "MHz"),
    ("_kbps", "KB/s"),
    ("_kib", "KiB, cumulative counter"),
    ("_width", "lanes"),
    ("_width_max", "lanes"),
    ("_ns", T_NS),
    ("_s", "s"),
    ("_tokens", "tokens"),
)
_DESCRIPTIONS = {
    "throttle_reasons": "NVML clock throttle reasons bitmask",
    "oom_kills": "kernel OOM kills so far",
    "cpu_outside_pct": "share of the host's CPU used outside loadproof's process tree",
    "pcie_gen": "current PCIe generation",
    "pcie_gen_max": "maximum PCIe generation",
}


def _unit(name: str) -> str | None:
    return next((unit for suffix, unit in _UNIT_SUFFIXES if name.endswith(suffix)), None)


def _fields(kind: type[msgspec.Struct], skip: tuple[str, ...] = ()) -> list[Column]:
    """A column per field of a run directory type (rundir), typed by the field's type."""
    info = msgspec.inspect.type_info(kind)
    assert isinstance(info, msgspec.inspect.StructType)
    return [
        Column(f.name, _struct_type(kind.__name__, f.name, f.type), _unit(f.name), _DESCRIPTIONS.get(f.name, ""))
        for f in info.fields
        if f.name not in skip
    ]


def _telemetry(run: Run) -> list[Table]:
    head = [Column("t_ns", INT, T_NS), Column("wall_time_s", FLOAT, WALL_S)]
    host_fields = _fields(HostSample)
    host_columns = [
        *head,
        *host_fields,
        Column("num_gpus", INT, None, "GPUs in the sample (null: no GPU telemetry)"),
        Column(
            "xid_events",
            JSON,
            None,
            "NVML Xid critical-error events since the last sample (device is the GPU index); null when none",
        ),
    ]

    def host_rows() -> Iterator[list[Any]]:
        for row in run.telemetry:
            yield [
                row.t_ns,
                row.wall_time_s,
                *(getattr(row.host, c.name) for c in host_fields),
                None if row.gpus is None else len(row.gpus),
                _json(msgspec.to_builtins(row.xid_events)) if row.xid_events else None,
            ]

    gpu_fields = _fields(GPUSample, skip=("index",))
    gpu_columns = [*head, Column("gpu", INT, None, "the GPU's NVML index"), *gpu_fields]

    def gpu_rows() -> Iterator[list[Any]]:
        for row in run.telemetry:
            for gpu in row.gpus or []:
                yield [row.t_ns, row.wall_time_s, gpu.index, *(getattr(gpu, c.name) for c in gpu_fields)]

    return [
        Table("telemetry_host", "one row per telemetry sample (telemetry.jsonl): the host", host_columns, host_rows),
        Table(
            "telemetry_gpu",
            "one row per telemetry sample and GPU (telemetry.jsonl); none without GPU telemetry",
            gpu_columns,
            gpu_rows,
        ),
    ]


def _answers(run: Run) -> Table:
    columns = _fields(Answer)

    def rows() -> Iterator[list[Any]]:
        for answer in run.answers:
            yield [getattr(answer, c.name) for c in columns]

    return Table("answers", "one row per scored quality item (answers.jsonl)", columns, rows)


def _json(value: Any) -> str:
    """A json column's cell: the value as compact JSON text."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
