"""The files beside run directories read through the reader of their version (store.series, store.schema):
a load search's, a capacity search's and a sweep's summary, a tune's journal and table. Every such file the
repository publishes (docs/runs) reads without losing a value; a file written before a field existed gets
it filled as its version's reader says; the current version reads back what was written."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from loadproof.errors import RunDirError
from loadproof.rundir.series import CapacitySearch, CapacityTrial, RateSearch, SearchTrial, Sweep, SweepPoint
from loadproof.rundir.tune import Measured, Predicted, TunePoint, TuneStarted, TuneTable
from loadproof.store.series import (
    read_capacity_search,
    read_rate_search,
    read_sweep,
    read_tune_journal,
    read_tune_table,
    write_document,
)

DOCS_RUNS = Path(__file__).resolve().parents[3] / "docs" / "runs"
TUNE = DOCS_RUNS / "embedded-2026-12-02-tune"
CAPACITY_SEARCH = DOCS_RUNS / "h200-2026-11-30" / "gemma-1gib-capacity-search.json"


def kept(raw: object, typed: object) -> list[str]:
    """Where `typed` (as JSON) lost or changed a value `raw` held: paths of the differences."""
    out: list[str] = []

    def walk(a: object, b: object, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key, value in a.items():
                if key not in b:
                    out.append(f"{path}.{key} lost")
                else:
                    walk(value, b[key], f"{path}.{key}")
        elif isinstance(a, list) and isinstance(b, (list, tuple)) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{path}[{i}]")
        elif a != b:
            out.append(f"{path}: {a!r} became {b!r}")

    walk(raw, msgspec.to_builtins(typed), "")
    return out


def test_the_published_tune_reads_through_its_types_without_losing_a_value():
    table = read_tune_table(TUNE / "tune.json")  # version 1: a bare list
    raw = json.loads((TUNE / "tune.json").read_text())
    assert kept(raw, table.points) == [] and len(table.points) == 6
    assert all(isinstance(p.predicted, Predicted) for p in table.points)
    assert [p.point for p in table.points if p.measured] == ["max_num_seqs=8", "max_num_seqs=12", "max_num_seqs=16"]
    # each search found a failing rate above its best: no rate is a lower bound
    assert not any(o.lower_bound for p in table.points for o in (p.predicted, p.measured) if o)
    lines = read_tune_journal(TUNE / "tune.jsonl")
    assert isinstance(lines[0], TuneStarted) and lines[0].schema == 2
    spec = lines[0].tune
    assert spec.grid == ["max_num_seqs=2,4,6,8,12,16"] and spec.tokenizer is None
    assert spec.load == {
        "rate": 1.0,
        "duration_s": 15.0,
        "input_tokens": "128",
        "output_tokens": "32",
        "slo": "ttft=1s,tpot=100ms",
        "attainment": 0.9,
        "search_max": 64.0,
        "search_resolution": "10%",
        "seed": 731,
        "search": "rate",
    }
    steps = [json.loads(line) for line in (TUNE / "tune.jsonl").read_text().splitlines()[1:]]
    assert kept(steps, lines[1:]) == []
    assert [type(s).__name__ for s in lines[1:]] == ["Predicted"] * 6 + ["Measured"] * 3


def test_the_published_capacity_search_reads_through_its_version_1_reader():
    search = read_capacity_search(CAPACITY_SEARCH)
    raw = json.loads(CAPACITY_SEARCH.read_text())
    assert "schema" not in raw and kept(raw, search) == []
    assert (search.largest_pass, search.smallest_fail, search.lower_bound, search.interrupted) == (29, 30, False, False)
    assert search.result is None and all(isinstance(t, CapacityTrial) for t in search.trials)


RATE_SEARCH_V1 = {  # a search.json written before versions (and before a bound was told from a result)
    "kind": "load-rate-search",
    "slo": {"ttft": 1.0},
    "slo_text": "ttft <= 1 s",
    "attainment": 0.99,
    "resolution": "10%",
    "resolution_rps": None,
    "resolution_relative": 0.1,
    "start_rps": 1.0,
    "maximum_rps": 4.0,
    "minimum_rps": 0.0156,
    "options": {"rate": None, "duration_s": 5.0},
    "trials": [
        {"index": 0, "rate_rps": 1.0, "passed": True, "reason": "SLO met 100.00% >= 99%", "run_dir": "load-a"},
        {"index": 1, "rate_rps": 2.0, "passed": True, "reason": "SLO met 100.00% >= 99%", "run_dir": "load-b"},
    ],
    "completed": True,
    "stopped": "maximum",
    "max_rate_rps": 2.0,
    "min_failing_rate_rps": None,
}


@pytest.mark.parametrize(
    ("changes", "bound", "interrupted"),
    [
        ({}, True, False),  # nothing above the best failed: a bound
        ({"min_failing_rate_rps": 4.0}, False, False),  # a failure above it: a result
        ({"min_failing_rate_rps": 4.0, "interrupted": True, "completed": False}, True, True),  # stopped: a bound
    ],
)
def test_a_version_1_rate_search_gets_what_it_lacks_filled(tmp_path: Path, changes, bound, interrupted):
    path = tmp_path / "search.json"
    path.write_text(json.dumps({**RATE_SEARCH_V1, **changes}))
    search = read_rate_search(path)
    assert (search.lower_bound, search.interrupted, search.result, search.schema) == (bound, interrupted, None, 3)
    assert (search.decision, search.segments) == ("point", 1)  # decided on the point value, as before #41
    assert all(isinstance(t, SearchTrial) for t in search.trials) and search.trials[1].run_dir == "load-b"
    assert search.trials[0].ttft_p99_s is None and search.trials[0].printed("ttft_p99_s") == "n/a"
    # a file that says it is version 1 reads the same
    path.write_text(json.dumps({**RATE_SEARCH_V1, **changes, "schema": 1}))
    assert read_rate_search(path) == search


def test_a_version_2_rate_search_was_decided_on_the_point_value(tmp_path: Path):
    path = tmp_path / "search.json"
    path.write_text(json.dumps({**RATE_SEARCH_V1, "schema": 2, "lower_bound": True, "result": "a bound"}))
    search = read_rate_search(path)
    assert (search.schema, search.decision, search.segments) == (3, "point", 1)
    assert all(t.level is None and t.decision is None for t in search.trials)


def test_the_current_versions_read_back_what_was_written(tmp_path: Path):
    trial = SearchTrial(rate_rps=2.0, passed=False, index=1, reason="SLO met 50.00% < 99%", run_dir="load-b")
    search = RateSearch(
        attainment=0.99, trials=[trial], interrupted=True, lower_bound=True, result="a bound", decision="interval"
    )
    write_document(tmp_path / "search.json", search)
    assert read_rate_search(tmp_path / "search.json") == search
    assert json.loads((tmp_path / "search.json").read_text())["schema"] == 3
    point = SweepPoint(kind="rate", rate_rps=4.0, run_dir="load-c", ttft_p99_s=0.25, ttft_p99_s_printed="0.250")
    sweep = Sweep(sweep="4", points_planned=1, points=[point], completed=True)
    write_document(tmp_path / "sweep.json", sweep)
    assert read_sweep(tmp_path / "sweep.json") == sweep
    capacity = CapacitySearch(parameter="sessions", trials=[CapacityTrial(4, "PASS", "every criterion passed", "c")])
    write_document(tmp_path / "capacity.json", capacity)
    assert read_capacity_search(tmp_path / "capacity.json") == capacity
    table = TuneTable(
        points=[
            TunePoint(
                point="max_num_seqs=2",
                settings={"scheduler.max_num_seqs": 2},
                predicted=Predicted(point="max_num_seqs=2", max_rate_rps=2.0, lower_bound=True, kv_gib=0.0),
                measured=Measured(point="max_num_seqs=2", search="runs/x", engine_ready_s=1.0, seconds=9.0),
            )
        ]
    )
    write_document(tmp_path / "tune.json", table)
    assert read_tune_table(tmp_path / "tune.json") == table


def test_a_version_newer_than_this_loadproof_or_a_misfit_is_one_error(tmp_path: Path):
    path = tmp_path / "search.json"
    path.write_text(json.dumps({**RATE_SEARCH_V1, "schema": 4}))
    with pytest.raises(RunDirError, match="schema version 4, newer than this loadproof reads"):
        read_rate_search(path)
    path.write_text(json.dumps({**RATE_SEARCH_V1, "trials": [{"rate_rps": "fast"}]}))
    with pytest.raises(RunDirError, match="does not fit the load_search schema"):
        read_rate_search(path)
    path.write_text(json.dumps({"kind": "load-sweep", "sweep": "1", "points_planned": 1}))
    with pytest.raises(RunDirError, match="not a rate search's summary"):
        read_rate_search(path)
    assert read_sweep(path).points == []  # a sweep with no finished point (version 1: no schema)
