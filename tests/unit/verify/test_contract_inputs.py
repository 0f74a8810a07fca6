"""A run judged by a prediction contract names the runs its sim profile was calibrated on, each with the
sha256 of its records' measured numbers (`store.digest.measurement_digest`). Publishing keeps those
numbers, so `verify` checks each named run the bundle holds against the contract; a run that is not the
one the contract rested on is a mismatch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loadproof.errors import UsageError
from loadproof.publish import publish
from loadproof.store.digest import measurement_digest
from loadproof.store.files import compressed
from loadproof.store.run_dir import load_run
from loadproof.verify.check import verify
from tests.unit.publish.synthetic import capacity_run, reseal, throughput_run

NAME = "throughput-20261130-083713-1022"


def judged(root: Path, sha256: str) -> Path:
    """The synthetic capacity run, judged by a contract calibrated on the synthetic throughput run."""
    run = capacity_run(root)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["prediction"] = {
        "scenario": "capacity",
        "options": {},
        "tolerance_pct": 10.0,
        "made_at": "2026-12-03T00:00:00Z",
        "sim_profile": {"name": "sim.toml", "sha256": "0" * 64},
        "calibration_inputs": [{"name": NAME, "sha256": sha256}, {"name": "--ttft 1000:0.5", "sha256": "1" * 64}],
        "figures": [],
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_the_digest_of_a_run_and_of_its_published_copy_agree_and_verify_checks_it(tmp_path: Path):
    source = throughput_run(tmp_path / "src")
    digest = measurement_digest(load_run(source).records)
    publish([source, judged(tmp_path / "src", digest)], tmp_path / "bundle")
    assert measurement_digest(load_run(tmp_path / "bundle" / "runs" / NAME).records) == digest
    result = verify(tmp_path / "bundle")
    checks = [c for c in result.checks if c.name.startswith("prediction.calibration_input")]
    assert [(c.name, c.ok) for c in checks] == [(f"prediction.calibration_input {NAME}", True)]  # --ttft: not a run
    assert result.ok, result.lines()


def test_a_run_that_is_not_the_contracts_input_is_refused_by_publish_and_caught_by_verify(tmp_path: Path):
    source = throughput_run(tmp_path / "src")
    digest = measurement_digest(load_run(source).records)
    edited = tmp_path / "other" / NAME
    shutil.copytree(source, edited)
    rows = (edited / "requests.jsonl").read_text().splitlines()
    first = json.loads(rows[0])
    first["end_ns"] += 1  # one nanosecond of a different run
    (edited / "requests.jsonl").write_text("\n".join([json.dumps(first), *rows[1:]]) + "\n")
    with pytest.raises(UsageError, match="publish self-check failed.*prediction.calibration_input.*not the one"):
        publish([edited, judged(tmp_path / "src", digest)], tmp_path / "refused")
    # a bundle edited after publishing, its checksums resealed: verify names the input
    publish([source, judged(tmp_path / "src2", digest)], tmp_path / "bundle")
    packed = tmp_path / "bundle" / "runs" / NAME / "requests.jsonl.zst"  # as publish stores it
    packed.write_bytes(compressed((edited / "requests.jsonl").read_bytes()))
    reseal(tmp_path / "bundle")
    result = verify(tmp_path / "bundle")
    (check,) = [c for c in result.checks if c.name.startswith("prediction.calibration_input")]
    assert not check.ok and not result.ok and "not the one the contract was calibrated on" in check.line()
