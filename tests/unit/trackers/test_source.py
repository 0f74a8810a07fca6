"""trackers/source.py: the run a tracker is sent, read once: from a run directory or a one-run bundle, its
claims.json (or its claims recomputed), its manifest sanitized."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loadproof.errors import UsageError
from loadproof.publish import publish
from loadproof.trackers.source import open_run
from tests.unit.trackers.runs import ANCHOR_WALL_NS, PRIVATE_HOST, claims_of, tracked_run


def test_a_run_directory_gives_its_claims_its_verdict_and_a_sanitized_manifest(tmp_path: Path):
    path = tracked_run(tmp_path)
    tracked = open_run(path)
    assert tracked.path == tracked.artifact == path and not tracked.bundled
    assert [c.name for c in tracked.claims] == [c["name"] for c in claims_of(path)]
    assert tracked.run_id == path.name and tracked.scenario == "throughput" and tracked.model == "tiny-model"
    assert tracked.engine_version == "0.9.1" and tracked.source == "loadproof" and tracked.verdict is None
    assert PRIVATE_HOST not in json.dumps(tracked.published)  # the target URL and the --url option
    assert tracked.published["options"]["repeats"] == 3
    assert tracked.start_ns() == ANCHOR_WALL_NS + 1_000_000_000  # the first send, 1 s after the anchor


def test_a_run_without_claims_json_has_them_recomputed(tmp_path: Path):
    path = tracked_run(tmp_path)
    published = claims_of(path)
    (path / "claims.json").unlink()
    assert [(c.name, c.value) for c in open_run(path).claims] == [(c["name"], c["value"]) for c in published]


def test_a_bundle_of_one_run_is_that_run_with_the_whole_bundle_as_its_artifact(tmp_path: Path):
    bundle = tmp_path / "bundle"
    publish([tracked_run(tmp_path / "runs")], bundle)
    tracked = open_run(bundle)
    assert tracked.bundled and tracked.artifact == bundle and tracked.path.parent == bundle / "runs"
    assert tracked.claims and all(c.name.startswith("throughput.") for c in tracked.claims)


def test_a_bundle_of_two_runs_names_them_and_a_folder_of_neither_says_so(tmp_path: Path):
    bundle = tmp_path / "bundle"
    publish([tracked_run(tmp_path / "runs", "a-1"), tracked_run(tmp_path / "runs", "b-2")], bundle)
    with pytest.raises(UsageError, match=r"a bundle of 2 runs; give one run directory: .*runs/a-1, .*runs/b-2"):
        open_run(bundle)
    with pytest.raises(UsageError, match="neither a run directory"):
        open_run(tmp_path / "runs")
    with pytest.raises(UsageError, match="no such folder"):
        open_run(tmp_path / "nowhere")


def test_a_claims_json_that_is_not_one_is_one_error_naming_it(tmp_path: Path):
    path = tracked_run(tmp_path)
    (path / "claims.json").write_text('{"claims": [{"name": 3}]}')
    with pytest.raises(UsageError, match="claims.json: not a claims file"):
        open_run(path)
    (path / "claims.json").write_text('{"claims": [')
    with pytest.raises(UsageError, match="claims.json"):
        open_run(path)
    shutil.rmtree(path)
