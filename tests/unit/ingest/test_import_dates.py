"""An imported run is dated by when its tool ran it, from the files the tools wrote themselves (tests/fixtures/ingest):
`vllm bench serve`'s `date` (local time as it saved the result, the run's end) less its `duration`; GuideLLM's
`benchmarks[i].start_time` and `end_time` (Unix time); AIPerf's `start_time` and `end_time` (local time); a
local time read in this machine's zone, and said so. inference-perf's lifecycle files state no date: the run is
dated by its import, marked so in the manifest, the store and `history`."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from loadproof.cli import main, ui
from loadproof.ingest.importing import import_results
from loadproof.results.store import open_store
from loadproof.rundir.source import DATED_BY_IMPORT
from tests.unit.ingest.test_import import AIPERF, GUIDELLM, INFERENCE_PERF, VLLM

WALL = "%Y-%m-%dT%H:%M:%SZ"


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """TZ as each test sets it (`set_zone`), and this process's zone back as it was afterwards."""
    yield
    monkeypatch.undo()
    time.tzset()


def set_zone(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("TZ", name)
    time.tzset()


def imported(path: Path, out: Path, tool: str = "auto"):
    (done,) = import_results(path, out, tool=tool)
    return done.report.run.manifest


def test_vllm_bench_serve_is_dated_by_its_date_less_its_duration(tmp_path, monkeypatch, zone):
    data = json.loads(VLLM.read_text())
    saved = datetime.strptime(data["date"], "%Y%m%d-%H%M%S")  # vLLM's local time, no zone
    set_zone(monkeypatch, "UTC")
    manifest = imported(VLLM, tmp_path / "utc")
    assert manifest.end_wall_time == saved.strftime(WALL)
    assert manifest.start_wall_time == (saved - timedelta(seconds=data["duration"])).strftime(WALL)
    assert manifest.source is not None and manifest.source.dated == (
        "date (local time as the result was saved, read as UTC+00:00) less duration"
    )
    # the same file imported on a machine five hours behind UTC (in December): its local time is 5 h later in UTC
    set_zone(monkeypatch, "America/New_York")
    manifest = imported(VLLM, tmp_path / "new-york")
    assert manifest.end_wall_time == (saved + timedelta(hours=5)).strftime(WALL)
    assert manifest.source is not None and "read as UTC-05:00" in manifest.source.dated


def test_guidellm_is_dated_by_its_benchmarks_unix_times_in_any_zone(tmp_path, monkeypatch, zone):
    bench = json.loads(GUIDELLM.read_text())["benchmarks"][0]
    set_zone(monkeypatch, "Asia/Tokyo")  # a Unix time is the same instant wherever it is read
    manifest = imported(GUIDELLM, tmp_path)
    assert manifest.start_wall_time == datetime.fromtimestamp(bench["start_time"], UTC).strftime(WALL)
    assert manifest.end_wall_time == datetime.fromtimestamp(bench["end_time"], UTC).strftime(WALL)
    assert manifest.source is not None
    assert manifest.source.dated == "benchmarks[0].start_time and end_time (Unix time)"


def test_aiperf_is_dated_by_its_start_time_which_its_requests_wall_clock_agrees_with(tmp_path, monkeypatch, zone):
    data = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    set_zone(monkeypatch, "UTC")  # the zone the recording machine ran in
    manifest = imported(AIPERF / "profile_export_aiperf.json", tmp_path)
    assert manifest.start_wall_time == datetime.fromisoformat(data["start_time"]).strftime(WALL)
    assert manifest.end_wall_time == datetime.fromisoformat(data["end_time"]).strftime(WALL)
    assert (
        manifest.source is not None
        and manifest.source.dated == "start_time and end_time (local time, read as UTC+00:00)"
    )
    # the requests' own Unix times (profile_export.jsonl, ns) fall within that start and end
    sends = [
        json.loads(line)["metadata"]["request_start_ns"]
        for line in (AIPERF / "profile_export.jsonl").read_text().splitlines()
    ]
    first, last = (datetime.fromtimestamp(ns / 1e9, UTC) for ns in (min(sends), max(sends)))
    start = datetime.strptime(manifest.start_wall_time, WALL).replace(tzinfo=UTC)
    end = datetime.strptime(manifest.end_wall_time, WALL).replace(tzinfo=UTC)
    assert start <= first <= last <= end + timedelta(seconds=1)  # the manifest keeps whole seconds


def test_inference_perf_states_no_date_so_its_run_is_dated_by_its_import_and_marked(tmp_path):
    before = datetime.now(UTC).replace(microsecond=0)
    manifest = imported(INFERENCE_PERF, tmp_path)
    assert manifest.start_wall_time is None
    assert manifest.source is not None and manifest.source.dated == DATED_BY_IMPORT
    assert manifest.source.dated_by_import
    assert manifest.end_wall_time is not None
    assert datetime.strptime(manifest.end_wall_time, WALL).replace(tzinfo=UTC) >= before


def test_history_orders_imported_runs_by_when_their_tools_ran_them(tmp_path, monkeypatch, zone, capsys):
    set_zone(monkeypatch, "UTC")  # the zone the recording machine ran in
    vllm, guidellm, aiperf = (
        json.loads(p.read_text()) for p in (VLLM, GUIDELLM, AIPERF / "profile_export_aiperf.json")
    )
    ran = {  # when each tool ran, as its own file says
        "vllm-bench": datetime.strptime(vllm["date"], "%Y%m%d-%H%M%S") - timedelta(seconds=vllm["duration"]),
        "guidellm": datetime.fromtimestamp(guidellm["benchmarks"][0]["start_time"], UTC).replace(tzinfo=None),
        "aiperf": datetime.fromisoformat(aiperf["start_time"]),
    }
    files = {"aiperf": AIPERF / "profile_export_aiperf.json", "guidellm": GUIDELLM, "vllm-bench": VLLM}
    files["inference-perf"] = INFERENCE_PERF
    runs = {tool: import_results(path, tmp_path / "runs" / tool)[0].path for tool, path in files.items()}
    order = [*sorted(ran, key=ran.__getitem__), "inference-perf"]  # the last imported, its file with no date
    assert order[:3] != list(files)[:3], "the fixtures ran in another order than they are imported here"
    db = tmp_path / "results.db"
    with open_store(str(db)) as store:
        for run in runs.values():
            store.add(run)
        stored = {r.run_id: r for r in store.query()}
    for tool, run in runs.items():
        kept = stored[run.name]
        assert kept.environment["imported"]["tool"] == tool
        assert kept.dated_by_import == (tool == "inference-perf")
        if tool in ran:  # the tool's own date, to the second
            assert kept.started_at.replace(tzinfo=None) == ran[tool].replace(microsecond=0)
    page = tmp_path / "history.html"
    argv = ["loadproof", "history", "load.ttft_s.p50", "--store", str(db), "--html", str(page)]
    monkeypatch.setattr(sys, "argv", argv)
    # a console as wide as the table (the width a worker's console has depends on what ran before in it)
    monkeypatch.setattr(ui, "out", Console(file=sys.stdout, width=250, soft_wrap=True, emoji=False))
    with pytest.raises(SystemExit) as exited:
        main()
    out = capsys.readouterr().out
    assert exited.value.code in (0, None), out
    lines = {tool: [line for line in out.splitlines() if runs[tool].name in line] for tool in runs}
    assert all(len(found) == 1 for found in lines.values()), out
    assert sorted(runs, key=lambda tool: out.index(runs[tool].name)) == order  # oldest first
    assert "*" in lines["inference-perf"][0] and all("*" not in lines[tool][0] for tool in ran)
    assert "* an imported run whose file states no date (inference-perf's), dated by when it was imported" in out
    assert page.read_text().count("(imported then: its file states no date)") == 1  # the page's table says it too
