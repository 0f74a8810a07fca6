"""A run's manifest is typed from its first line to its last (issue #37, "typed when read, not when written"):
the scenarios fill `rundir.Manifest`, never a dict, and what they write reads back as it was."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from loadproof.rundir import Manifest
from loadproof.rundir.manifest import ClockAnchor, ParentClock, Price, SeriesPoint, WorkerInfo, WorkersInfo
from loadproof.scenarios.recording import common_manifest
from loadproof.store.run_dir import RunWriter, load_run

SRC = Path(__file__).resolve().parents[3] / "src"
# a parameter or variable annotated as a manifest held in a dict (`manifest: dict[str, Any]`, `manifest_extra:
# Mapping[...]`); store.run_dir's `write_manifest(manifest: Manifest | Mapping)` converts one, and is no match
AS_DICT = re.compile(r"\bmanifest\w*\s*:\s*(dict|Mapping|MutableMapping)\b")


def test_no_manifest_is_a_dict_in_src():
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if AS_DICT.search(line)
    ]
    assert not found, "a manifest is a rundir.Manifest, never a dict:\n" + "\n".join(found)


def test_every_run_starts_from_the_commands_fields_typed():
    command = Manifest(price=Price(per_kwh=0.3), sweep=SeriesPoint(folder="load-sweep-x", index=2, point="rate"))
    options = SimpleNamespace(model_dump=lambda: {"rate": 4.0})
    target = SimpleNamespace(
        describe=lambda: {"url": "http://127.0.0.1:9", "model": "m", "endpoint": "completions"},
        served=SimpleNamespace(version="0.11.0"),
    )
    manifest = common_manifest("load-1", "load", options, target, command)
    assert manifest.run_id == "load-1" and manifest.scenario == "load" and manifest.options == {"rate": 4.0}
    assert manifest.target.model == "m" and manifest.engine_version == "0.11.0"
    assert isinstance(manifest.clock_anchor, ClockAnchor) and manifest.crosscheck is not None
    assert manifest.price == command.price and manifest.sweep == command.sweep
    assert command.run_id is None  # the command's fields are shared by a series' runs: never changed in place


def test_a_scaled_out_runs_workers_keep_absent_and_null_apart(tmp_path: Path):
    """A worker that reported nothing has no pid; one whose clock was never read again has no drift; a
    process on this host has a null Ray node."""
    reported = WorkerInfo(worker=0, requests=3, recorded=3, max_concurrency=None, pid=11, node=None, error=None)
    reported.dispatched, reported.failed, reported.interrupted, reported.late_start_ms = 3, 0, False, 0.2
    reported.offset_ns, reported.bracket_ns, reported.shift_ns, reported.alignment_error_bound_ns = 5, 2, 1, 2
    silent = WorkerInfo(worker=1, requests=2, recorded=0, max_concurrency=None)
    workers = WorkersInfo(count=2, how="processes", ray_address=None, split="round-robin", max_concurrency=[None] * 2)
    with RunWriter(tmp_path / "load-1") as writer:
        manifest = Manifest(run_id="load-1", scenario="load", workers=workers)
        writer.write_manifest(manifest)
        before = json.loads((writer.path / "manifest.json").read_text())["workers"]
        workers.start_ns, workers.clock, workers.alignment_error_bound_ns = 100, "t_parent = ...", 2
        workers.parent_clock = ParentClock(offset_ns=4, bracket_ns=2, drift_ns=0)
        workers.per_worker = [reported, silent]
        writer.write_manifest(manifest)
    assert set(before) == {"count", "how", "ray_address", "split", "max_concurrency"}  # before the merge
    after = json.loads((tmp_path / "load-1" / "manifest.json").read_text())["workers"]
    first, second = after["per_worker"]
    assert first["node"] is None and first["error"] is None and "drift_ns" not in first
    assert set(second) == {"worker", "requests", "recorded", "max_concurrency"}
    assert load_run(tmp_path / "load-1").manifest.workers == workers
