"""Runs for the results store's tests: published runs of tests/bundles.py's sample, copied, their claims
recomputed by this loadproof so that they carry intervals (the bundles under docs/runs were published before
claims had them); a run whose manifest names a private server with credentials; a run with a broken claims.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import claims_payload
from loadproof.store.run_dir import load_run, write_claims
from tests.bundles import DOCS_RUNS, SAMPLE

SEARCH = "h200-2026-12-01/mla-2l-load-search"  # five load runs of one profile, minutes apart
LOAD = "h200-2026-12-02/load-slo-ngram"  # one load run of another profile, a day later
CAPACITY = "h200-2026-11-30/llama-capacity-8x120k"  # a capacity run: a FAIL verdict, no load claims
CLAIM = "load.ttft_s.p50"  # with an interval in every run (a p99 needs 368 values; these have 160 to 320)
SECRET_PASSWORD = "hunter2-Pa55word"
SECRET_KEY = "sk-live-0123456789abcdefXYZ"
PRIVATE_HOST = "gpu-7.corp.internal"
PRIVATE_PATH = "/home/alice/models/llama-3"


def recomputed(run: Path, dest: Path) -> Path:
    """A copy of `run` under `dest` with claims.json recomputed (intervals included)."""
    copy = dest / run.name
    shutil.copytree(run, copy)
    claims = compute_claims(load_run(copy))
    write_claims(copy, claims_payload(load_run(copy).run_id, claims))
    return copy


def bundle_runs(name: str) -> list[Path]:
    assert name in SAMPLE, f"{name} is not in tests/bundles.py's SAMPLE"
    return sorted((DOCS_RUNS / name / "runs").iterdir())


def history_runs(dest: Path) -> list[Path]:
    """The search's five runs and the other load run, recomputed, in one folder."""
    dest.mkdir(parents=True, exist_ok=True)
    return [recomputed(run, dest) for name in (SEARCH, LOAD) for run in bundle_runs(name)]


def private_run(dest: Path) -> Path:
    """A load run whose manifest names a private server with a user, a password and a key in its URL, and a
    model served from a home directory."""
    run = recomputed(bundle_runs(LOAD)[0], dest)
    manifest_path = run / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["target"]["url"] = f"http://admin:{SECRET_PASSWORD}@{PRIVATE_HOST}:8000/v1?api_key={SECRET_KEY}"
    manifest["target"]["model"] = PRIVATE_PATH
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return run


def edit_claims(run: Path, text: str) -> None:
    (run / "claims.json").write_text(text, encoding="utf-8")
