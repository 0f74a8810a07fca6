"""Every bundle the repository publishes (docs/runs/) verifies offline, claim by claim, every claim it
recomputes has its formula in the docs, and each file kind of each of its runs reads through the typed
reader of its schema version without losing a value.

This is the one module that walks every bundle; every other test reads the fixed sample of
tests/bundles.py, which the last test here checks holds every kind of published run there is."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import msgspec
import pytest

from loadproof.rundir import Event, Manifest
from loadproof.rundir.fleet_keys import is_fleet_row
from loadproof.store.run_dir import load_run, read_jsonl
from loadproof.store.schema import READERS, event_json, manifest_json, read_manifest, read_rows, versions_of
from loadproof.verify import verify
from tests import bundles as sample
from tests.unit.metrics.test_docs_formulas import docs_text, undocumented

BUNDLES = sorted(p.parent for p in sample.DOCS_RUNS.glob("**/SHA256SUMS"))


MAX_DOCS_RUNS_BYTES = 15 * 10**6  # issue #37: a GPU machine's call carries 64 MiB of tree; the bundles keep to 15 MB


def test_the_repository_publishes_bundles():
    assert BUNDLES, "docs/runs/ holds no bundle"


def test_docs_runs_stays_under_its_size_budget():
    """What the repository publishes keeps to its budget: a new bundle that would pass it is summarized (a
    subset of runs, or its figures in the docs) rather than the tree growing with each publication."""
    size = sum(p.stat().st_size for p in sample.DOCS_RUNS.rglob("*") if p.is_file())
    assert size < MAX_DOCS_RUNS_BYTES, f"docs/runs holds {size:,} bytes, over {MAX_DOCS_RUNS_BYTES:,}"


@functools.cache
def docs() -> str:
    return docs_text()


@pytest.mark.parametrize("bundle", BUNDLES, ids=[sample.label(b) for b in BUNDLES])
def test_bundle_verifies(bundle: Path):
    result = verify(bundle)
    assert not result.problems, [str(p) for p in result.problems]
    bad = [c for c in result.checks if not c.ok]
    assert not bad, bad[:5]
    assert len(result.checks) > 10
    missing = undocumented([c for run in result.runs for c in run.recomputed or []], docs())
    assert not missing, f"claims with no formula in docs/*.md (document each name in backticks): {missing}"


def test_the_fixed_sample_holds_every_kind_of_published_run():
    published = set().union(*(sample.kinds(b) for b in BUNDLES))
    assert set(sample.bundles()) <= set(BUNDLES), "tests/bundles.py names a bundle docs/runs lacks"
    held = set().union(*(sample.kinds(b) for b in sample.bundles()))
    assert published - held == set(), "add a bundle of each kind to tests/bundles.py's SAMPLE"


RUN_DIRS = sorted(p.parent for b in BUNDLES for p in (b / "runs").glob("*/manifest.json"))
KINDS = (
    ("metrics", "metrics.jsonl"),
    ("events", "events.jsonl"),
    ("telemetry", "telemetry.jsonl"),
    ("answers", "answers.jsonl"),
)


def held(raw: object, typed: object, where: str) -> None:
    """Every value of `raw` (a stored JSON value) is in `typed` (what the typed reader made of it), unchanged:
    a struct's field for each key (the manifest's unknown keys in `extra`, an event's in `fields`)."""
    if isinstance(typed, msgspec.Struct):
        assert isinstance(raw, dict), where
        spill = (
            getattr(typed, "extra", None)
            if isinstance(typed, Manifest)
            else getattr(typed, "fields", None)
            if isinstance(typed, Event)
            else None
        )
        for key, value in raw.items():
            if key in typed.__struct_fields__ and key not in ("extra", "fields"):
                held(value, getattr(typed, key), f"{where}.{key}")
            else:
                assert spill is not None and key in spill, f"{where}.{key} was dropped"
                held(value, spill[key], f"{where}.{key}")
    elif isinstance(raw, dict):
        assert isinstance(typed, dict) and set(typed) == set(raw), where
        for key, value in raw.items():
            held(value, typed[key], f"{where}.{key}")
    elif isinstance(raw, list):
        assert isinstance(typed, list) and len(typed) == len(raw), where
        for i, (a, b) in enumerate(zip(raw, typed)):
            held(a, b, f"{where}[{i}]")
    else:
        assert raw == typed and (type(raw) is type(typed) or isinstance(typed, float)), (where, raw, typed)


@pytest.mark.parametrize("run_dir", RUN_DIRS, ids=[sample.label(r) for r in RUN_DIRS])
def test_every_file_kind_reads_through_its_versions_typed_reader_losing_nothing(run_dir: Path):
    raw = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    # bundles published before 2026-12-02 predate recorded versions (all version 1); later ones record theirs
    assert "schema" not in raw or set(raw["schema"]) == {"manifest", "metrics", "events", "telemetry", "answers"}
    manifest = read_manifest(raw, run_dir / "manifest.json")
    held(raw, manifest, "manifest")
    assert read_manifest(manifest_json(manifest)) == manifest  # written back, it reads the same
    versions = versions_of(raw, run_dir)
    run = load_run(run_dir)
    assert run.manifest == manifest
    for kind, name in KINDS:
        rows = read_jsonl(run_dir / name)[0]
        typed = read_rows(kind, rows, getattr(versions, kind), run_dir / name)
        kept = {"metrics": run.samples, "events": run.events, "telemetry": run.telemetry, "answers": run.answers}
        if kind == "metrics":  # a fleet's replica and router rows are kept apart from the engine's
            assert [s for s in typed if is_fleet_row(s.source)] == run.fleet_samples
            assert [s for s in typed if not is_fleet_row(s.source)] == run.samples
        else:
            assert typed == kept[kind]
        for i, (row, value) in enumerate(zip(rows, typed)):
            held(row, value, f"{name}:{i + 1}")
            again = event_json(value) if kind == "events" else msgspec.to_builtins(value)
            assert READERS[kind][getattr(versions, kind)](again) == value, f"{name}:{i + 1} does not read back"
