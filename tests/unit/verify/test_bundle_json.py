"""bundle.json is typed (rundir.bundle.Bundle) and read through the reader of its version
(store.schema.read_bundle), by `verify` as by anyone: every bundle.json under docs/runs reads and is written
back byte for byte, a newer version or a misfit is one line naming the file and the entry, and `verify`
still checks the run folders of a bundle whose bundle.json it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadproof.errors import RunDirError
from loadproof.rundir.bundle import Bundle, BundleSeries
from loadproof.store.schema import READERS, bundle_json, read_bundle
from loadproof.verify import verify
from tests import bundles
from tests.unit.publish.synthetic import reseal

DESCRIBED = sorted(bundles.DOCS_RUNS.glob("**/bundle.json"))
SOURCE = bundles.DOCS_RUNS / "h200-2026-11-30" / "llama-prefill-100k"
RUN = "runs/prefill-20261130-093906-cbb5"


@pytest.mark.parametrize("path", DESCRIBED, ids=[bundles.label(p.parent) for p in DESCRIBED])
def test_every_published_bundle_json_reads_through_its_versions_reader_and_writes_back_as_it_was(path: Path):
    text = path.read_text(encoding="utf-8")
    described = read_bundle(json.loads(text), path)
    assert described.format_version == Bundle.version == max(READERS["bundle"]) == 1
    assert json.dumps(bundle_json(described), indent=2, ensure_ascii=False) + "\n" == text  # as publish writes it
    assert all(run.provenance is not None for run in described.runs)


def header(**fields: object) -> dict[str, object]:
    return {"format": "loadproof-bundle", "runs": [{"run_id": "r", "path": "runs/r"}], **fields}


def test_a_bundle_json_without_a_format_version_is_version_1_and_its_header_may_be_bare():
    described = read_bundle(header(series=[{"kind": "sweep", "series_id": "s", "runs": ["runs/r"]}]))
    assert described.format_version == 1 and described.loadproof_version is None
    assert described.series == [BundleSeries(kind="sweep", series_id="s", runs=["runs/r"])]
    assert "series" not in bundle_json(read_bundle(header()))  # no series: none written


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (header(format_version=2), "bundle.json is schema version 2, newer than this loadproof reads (up to 1)"),
        (header(format_version="1"), "bundle.json: format_version '1' is not a version number"),
        ([1], "bundle.json is not a bundle description (not a JSON object)"),
        ({"format": "loadproof-bundle"}, "bundle.json does not fit the bundle schema: `runs` (and `series`"),
        (
            {**header(), "runs": [{"run_id": "r", "path": "runs/r"}, {"run_id": "x", "path": 7}]},
            "bundle.json does not fit the bundle schema: run 2: Expected `str`, got `int` - at `$.path`",
        ),
        (
            header(series=[{"kind": "grid", "series_id": "s", "runs": []}]),
            "bundle.json does not fit the bundle schema: series 1: Invalid enum value 'grid' - at `$.kind`",
        ),
        (header(runs_total=3), "bundle.json does not fit the bundle schema: Object contains unknown field"),
    ],
)
def test_a_bundle_json_this_loadproof_does_not_read_is_one_line_naming_it(raw: object, said: str):
    with pytest.raises(RunDirError) as caught:
        read_bundle(raw)
    assert str(caught.value).startswith(said), str(caught.value)


def test_verify_fails_a_bundle_json_that_does_not_fit_and_still_checks_its_run_folders(tmp_path: Path):
    bundle = bundles.plain_copy(SOURCE, tmp_path / "bundle")
    meta = json.loads((bundle / "bundle.json").read_text())
    meta["runs"][0]["num_records"] = "many"
    (bundle / "bundle.json").write_text(json.dumps(meta))
    reseal(bundle)
    result = verify(bundle)
    assert not result.ok
    (problem,) = [p for p in result.problems if p.path == "bundle.json"]
    assert problem.kind == "UNREADABLE" and "run 1: Expected `int | null`, got `str`" in problem.detail
    (run,) = result.runs
    assert run.path == RUN and run.checks and all(check.ok for check in run.checks)
