"""`loadproof export`: real published runs as CSV and Parquet tables, read back with the csv module and
pyarrow and compared, value for value and type for type, with the JSONL files they came from."""

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.errors import RunDirError, UsageError
from loadproof.records import RequestRecord
from loadproof.rundir import Answer, EngineSample
from loadproof.store import export as export_module
from loadproof.store.export import export_run
from loadproof.store.files import content_path, read_content
from loadproof.store.run_dir import RunWriter, load_run
from tests import bundles

INTERFERENCE = bundles.one_run("h200-2026-11-30/llama-interference")  # events, 1 GPU
THROUGHPUT_2GPU = bundles.one_run("h200x2-2026-11-30/mla-pp2-throughput")  # 2 GPUs
QUALITY = bundles.one_run("h200-2026-11-30/gemma-quality")  # answers, no metrics
ARROW = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string(), "json": pa.string()}


def jsonl(path: Path) -> list[dict]:
    """Rows of a JSONL file, plain or compressed (`path.zst`, as a bundle stores it); none when it is absent."""
    try:
        return [json.loads(line) for line in read_content(content_path(path)).decode().splitlines()]
    except FileNotFoundError:
        return []


def expected_tables(run: Path) -> dict[str, list[dict]]:
    """Each table as it should read back, built from the raw JSONL files (not through load_run)."""
    fields = [f for f in RequestRecord.__struct_fields__ if f not in ("chunk_ns", "chunk_tokens", "tool_calls")]
    defaults = RequestRecord(request_id="", endpoint="")  # a published run leaves out output_text
    requests = [
        {
            **{f: row.get(f, getattr(defaults, f)) for f in fields},
            "ttft_ns": None if row["first_token_ns"] is None else row["first_token_ns"] - row["send_ns"],
            "latency_ns": None if row["last_token_ns"] is None else row["last_token_ns"] - row["send_ns"],
            "tool_calls": json.dumps(row["tool_calls"], separators=(",", ":")) if row.get("tool_calls") else None,
        }
        for row in jsonl(run / "requests.jsonl")
    ]
    chunks = [
        {"request_id": row["request_id"], "chunk_index": i, "t_ns": t, "tokens": n}
        for row in jsonl(run / "chunks.jsonl")
        for i, (t, n) in enumerate(zip(row["t_ns"], row["tokens"]))
    ]
    metrics = [
        {"t_ns": s["t_ns"], "wall_time_s": s["wall_time_s"], "metric": name, "value": value}
        for s in jsonl(run / "metrics.jsonl")
        for name, value in s["values"].items()
    ]
    events = [
        {
            "t_ns": e.get("t_ns"),
            "wall_time_s": e["wall_time_s"],
            "kind": e["kind"],
            "fields": {k: v for k, v in e.items() if k not in ("t_ns", "wall_time_s", "kind")},
        }
        for e in jsonl(run / "events.jsonl")
    ]
    telemetry = jsonl(run / "telemetry.jsonl")
    host = [
        {
            "t_ns": r["t_ns"],
            "wall_time_s": r["wall_time_s"],
            **r["host"],
            "num_gpus": len(r["gpus"]) if "gpus" in r else None,
            "xid_events": r.get("xid_events") or None,
        }
        for r in telemetry
    ]
    gpus = [
        {
            "t_ns": r["t_ns"],
            "wall_time_s": r["wall_time_s"],
            "gpu": g["index"],
            **{k: v for k, v in g.items() if k != "index"},
        }
        for r in telemetry
        for g in r.get("gpus", [])
    ]
    tables = {
        "requests": requests,
        "chunks": chunks,
        "metrics": metrics,
        "events": events,
        "telemetry_host": host,
        "telemetry_gpu": gpus,
    }
    if any(run.glob("answers.jsonl*")):
        tables["answers"] = jsonl(run / "answers.jsonl")
    return tables


def read_csv(path: Path, columns: list[dict]) -> list[dict]:
    """A CSV table typed by export.json: empty cell null, true/false, int64, float64, json."""
    convert = {
        "int64": int,
        "float64": float,
        "bool": {"true": True, "false": False}.__getitem__,
        "string": str,
        "json": json.loads,
    }
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        assert next(reader) == [c["name"] for c in columns]
        return [
            {c["name"]: None if cell == "" else convert[c["type"]](cell) for c, cell in zip(columns, line)}
            for line in reader
        ]


def read_parquet(path: Path, columns: list[dict]) -> list[dict]:
    table = pq.read_table(path)
    assert [(f.name, f.type) for f in table.schema] == [(c["name"], ARROW[c["type"]]) for c in columns]
    if "t_ns" in table.schema.names:  # each column's unit travels in its field metadata
        assert table.schema.field("t_ns").metadata[b"unit"] == b"ns, run clock"
    rows = table.to_pylist()
    for c in columns:
        if c["type"] == "json":
            for row in rows:
                row[c["name"]] = None if row[c["name"]] is None else json.loads(row[c["name"]])
    return rows


def exported(run: Path, fmt: str, out: Path) -> tuple[dict, dict[str, list[dict]]]:
    export_run(run, out, fmt)
    manifest = json.loads((out / "export.json").read_text())
    read = read_csv if fmt == "csv" else read_parquet
    tables = {t["name"]: read(out / t["file"], t["columns"]) for t in manifest["tables"]}
    for t in manifest["tables"]:
        assert len(tables[t["name"]]) == t["rows"]
    return manifest, tables


def typed(rows: list[dict], csv_strings: bool) -> list[dict]:
    """Rows with each value tagged by its type, so 1 != 1.0 and True != 1; in CSV an empty string is null."""
    return [
        {k: (type(v).__name__, v) if v != "" or not csv_strings else ("NoneType", None) for k, v in row.items()}
        for row in rows
    ]


@pytest.fixture(params=[INTERFERENCE, THROUGHPUT_2GPU, QUALITY], ids=["interference", "throughput-2gpu", "quality"])
def real_run(request, tmp_path):
    run = tmp_path / request.param.name
    shutil.copytree(request.param, run)
    return run


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_real_run_round_trips_exactly(real_run, fmt, tmp_path):
    manifest, tables = exported(real_run, fmt, tmp_path / "out")
    expected = expected_tables(real_run)
    assert list(tables) == list(expected)
    for table in manifest["tables"]:
        names, rows = [c["name"] for c in table["columns"]], expected[table["name"]]
        assert set().union(*rows) <= set(names)  # every stored field has its column (some columns may be all null)
        rows = [{name: row.get(name) for name in names} for row in rows]
        assert typed(tables[table["name"]], fmt == "csv") == typed(rows, fmt == "csv"), table["name"]

    run = load_run(real_run)
    assert len(tables["requests"]) == len(run.records)
    assert len(tables["chunks"]) == sum(len(r.chunk_ns) for r in run.records)
    assert len(tables["metrics"]) == sum(len(s.values) for s in run.samples)
    assert len(tables["telemetry_host"]) == len(run.telemetry)
    assert len(tables["telemetry_gpu"]) == sum(len(r.gpus or []) for r in run.telemetry)
    first = next(r for r in tables["requests"] if r["first_token_ns"] is not None)
    assert type(first["first_token_ns"]) is int and type(first["ok"]) is bool and type(first["ttft_ns"]) is int
    assert manifest["run_id"] == real_run.name and manifest["format"] == fmt
    assert manifest["clock_anchor"] == json.loads((real_run / "manifest.json").read_text())["clock_anchor"]
    columns = {t["name"]: {c["name"]: c for c in t["columns"]} for t in manifest["tables"]}
    assert columns["requests"]["send_ns"]["unit"] == "ns, run clock"
    assert columns["requests"]["ttft_ns"]["derived"] == "first_token_ns - send_ns"
    assert columns["telemetry_gpu"]["power_w"] == {"name": "power_w", "type": "float64", "unit": "W"}
    assert set(columns["requests"]) == set(RequestRecord.__struct_fields__) - {"chunk_ns", "chunk_tokens"} | {
        "ttft_ns",
        "latency_ns",
    }  # tool_calls: one JSON text column


def odd_run(tmp_path: Path) -> Path:
    """A run with the shapes real runs rarely show: no GPU, an Xid event, an event without t_ns, answers
    whose fields come and go (an integer depth, a field answers have no type for), a chunk list and text
    needing CSV quoting."""
    with RunWriter.create(tmp_path, "quality") as writer:
        writer.write_manifest({"run_id": writer.run_id, "scenario": "quality"})
        writer.append(
            RequestRecord(
                request_id="r1",
                endpoint="chat",
                ok=True,
                send_ns=10,
                first_token_ns=15,
                last_token_ns=19,
                end_ns=20,
                output_text='a, "b"\nc',
                chunk_ns=[15, 19],
                chunk_tokens=[1, 2],
                error_message="",
            )
        )
        writer.append(RequestRecord(request_id="r2", endpoint="chat", error_kind="timeout", send_ns=30, end_ns=40))
        writer.event("restart", reason="probe failed", attempt=2)
        writer.event("cancel", t_ns=35, sessions=[1, 2])
        writer.metric_sample(EngineSample(t_ns=12, wall_time_s=1.5, values={"a": 1.0, "b": 2.5}))
        for row in (
            {"suite": "s", "item_id": "1", "length_tokens": 1, "depth": 0.5},
            {"suite": "s", "item_id": "2", "length_tokens": 2, "depth": 1, "mode": "cot"},
            {"suite": "s", "item_id": "3", "correct": True},
        ):
            writer.answer(row)
    with open(writer.path / "telemetry.jsonl", "w") as handle:
        for row in (
            {"t_ns": 11, "wall_time_s": 1.25, "host": {"cpu_busy_pct": None, "mem_used_bytes": 5}},
            {
                "t_ns": 13,
                "wall_time_s": 1.75,
                "host": {"cpu_busy_pct": 3.5, "mem_used_bytes": 6},
                "xid_events": [{"xid": 79, "device": None}],
            },
        ):
            handle.write(json.dumps(row) + "\n")
    return writer.path


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_odd_shapes_keep_their_values_and_types(tmp_path, fmt):
    manifest, tables = exported(odd_run(tmp_path), fmt, tmp_path / "out")
    types = {t["name"]: {c["name"]: c["type"] for c in t["columns"]} for t in manifest["tables"]}
    assert tables["requests"][0]["output_text"] == 'a, "b"\nc'
    assert tables["requests"][1]["first_token_ns"] is None and tables["requests"][1]["ttft_ns"] is None
    assert [(c["request_id"], c["chunk_index"], c["t_ns"], c["tokens"]) for c in tables["chunks"]] == [
        ("r1", 0, 15, 1),
        ("r1", 1, 19, 2),
    ]  # r2 has no chunks
    assert [(e["t_ns"], e["kind"], e["fields"]) for e in tables["events"]] == [
        (None, "restart", {"reason": "probe failed", "attempt": 2}),
        (35, "cancel", {"sessions": [1, 2]}),
    ]
    assert tables["telemetry_gpu"] == [] and "power_w" in types["telemetry_gpu"]  # same columns as a GPU run
    host = tables["telemetry_host"]
    assert [(h["cpu_busy_pct"], h["mem_used_bytes"], h["num_gpus"], h["xid_events"]) for h in host] == [
        (None, 5, None, None),
        (3.5, 6, None, [{"xid": 79, "device": None}]),
    ]
    assert list(types["answers"]) == list(Answer.__struct_fields__)  # the typed row's fields, nothing else
    assert {k: types["answers"][k] for k in ("length_tokens", "depth", "mode", "correct")} == {
        "length_tokens": "int64",
        "depth": "float64",
        "mode": "string",
        "correct": "bool",
    }
    assert [(a["length_tokens"], a["depth"], a["mode"], a["correct"]) for a in tables["answers"]] == [
        (1, 0.5, "plain", None),
        (2, 1.0, "cot", None),
        (None, None, "plain", True),
    ]
    assert type(tables["answers"][1]["depth"]) is float and type(tables["answers"][0]["length_tokens"]) is int


def test_a_field_the_typed_row_does_not_know_is_refused_not_dropped(tmp_path):
    run = odd_run(tmp_path)
    with open(run / "answers.jsonl", "a") as handle:
        handle.write('{"suite": "s", "item_id": "9", "unknown_field": {"k": [1]}}\n')
    with pytest.raises(RunDirError, match="unknown_field"):
        load_run(run)


def test_an_interrupted_run_exports_what_finished(tmp_path):
    run = odd_run(tmp_path)
    with open(run / "requests.jsonl", "a") as handle:
        handle.write('{"request_id": "r3", "endpo')  # killed mid-write
    manifest, tables = exported(run, "csv", tmp_path / "out")
    assert [r["request_id"] for r in tables["requests"]] == ["r1", "r2"]
    assert manifest["num_torn_lines_skipped"] == 1


def test_the_out_folder_must_be_new_or_empty_and_a_failure_leaves_nothing(tmp_path, monkeypatch):
    run = odd_run(tmp_path)
    (tmp_path / "empty").mkdir()
    export_run(run, tmp_path / "empty", "csv")  # an empty folder is fine
    with pytest.raises(UsageError, match="is not empty"):
        export_run(run, tmp_path / "empty", "parquet")

    def broken(run):
        raise OSError("disk full")

    monkeypatch.setattr(export_module, "_events", broken)
    with pytest.raises(OSError, match="disk full"):
        export_run(run, tmp_path / "new", "parquet")
    assert not (tmp_path / "new").exists()


def test_the_command_writes_next_to_the_run_by_default(tmp_path):
    run = odd_run(tmp_path)
    result = CliRunner().invoke(app, ["export", str(run), "--format", "parquet"])
    assert result.exit_code == 0, result.output
    assert "requests.parquet: 2 rows" in result.output
    assert sorted(p.name for p in (run / "export").iterdir()) == [
        "answers.parquet",
        "chunks.parquet",
        "claims.parquet",  # the command adds the run's claims (tests/unit/report/test_claims_table.py)
        "events.parquet",
        "export.json",
        "metrics.parquet",
        "requests.parquet",
        "telemetry_gpu.parquet",
        "telemetry_host.parquet",
    ]


NO_PYARROW = (
    "import sys; sys.modules['pyarrow'] = sys.modules['pyarrow.parquet'] = None; from loadproof.cli import main; "
)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--format", "parquet"], "--format parquet needs pyarrow: pip install 'loadproof[parquet]'"),
        (["--format", "xlsx"], "--format must be csv or parquet (got 'xlsx')"),
        (["--out", "{run}"], "is not empty; give a new or empty folder"),
        ([], "no run directory at"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    run = odd_run(tmp_path) if args else tmp_path / "nope"
    argv = ["loadproof", "export", str(run), *(a.format(run=run) for a in args)]
    code = NO_PYARROW + f"sys.argv = {argv!r}; main()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (run / "export").exists()
