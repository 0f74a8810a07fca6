"""The published bundles (docs/runs) that tests read, named in this one place.

One module alone walks every bundle under docs/runs: tests/unit/verify/test_repo_bundles.py verifies each,
reads each file kind of each run through its version's reader, and checks that every claim they recompute
has its formula in the docs. Every other test that wants real published runs reads the fixed `SAMPLE`
below, so the suite does not slow down with each publication. test_repo_bundles also checks that the
sample holds every kind of published run there is (`kinds`: scenario, plan version, the schema versions
a manifest records, a prediction contract, a bundle's series), so a test that reads each kind still does;
a publication of a new kind fails there until a bundle of it joins the sample.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from loadproof.store.files import ZST, read_content
from loadproof.verify.checksums import write_sums

ROOT = Path(__file__).resolve().parents[1]
DOCS_RUNS = ROOT / "docs" / "runs"

# bundle (under docs/runs) -> what it brings to the sample; small ones where there is a choice
SAMPLE: dict[str, str] = {
    "h200x2-2026-11-30/mla-pp2-throughput": "throughput before plans were typed; telemetry of two GPUs",
    "h200-2026-11-30/llama-capacity-8x120k": "capacity before plans were typed; a FAIL verdict",
    "h200-2026-11-30/llama-interference": "interference before plans were typed; events",
    "h200-2026-11-30/llama-prefill-100k": "prefill before plans were typed",
    "h200-2026-11-30/gemma-quality": "quality: answers, no engine metrics",
    "embedded-2026-12-01/sim-calibration": "capacity 1, prefill 1 and throughput 2 without schema versions",
    "h200-2026-12-02/throughput-nodraft": "throughput 2 with schema versions",
    "h200-2026-12-02-contract/grid": "capacity 1 and prefill 1 with schema versions",
    "h200-2026-12-02-contract/capacity-24x1m": "capacity 1 with schema versions, judged by a prediction contract",
    "h200-2026-12-01/mla-2l-load-search": "load 1 without schema versions; a rate search series",
    "h200-2026-12-02/load-slo-ngram": "load 1 with schema versions",
    "h200-2026-12-01/mla-2l-replay-mooncake": "replay 1",
    "h200-2026-12-02/ab-drafts-c1": "ab 1",
    "h200-2026-12-02-offload/sessions-offload-r1": "sessions 1, against a CPU KV tier",
    "h200-2026-12-02-pd/2-pd": "interference 1, prefill and decode disaggregated",
    "embedded-2026-12-05-fleet/replica-loss": "replay 1 of an agent trace through a fleet: replica and router rows",
    "embedded-2026-12-06-demo": "one `loadproof demo`: soak and quality with schema versions, claims with intervals",
}


def bundles() -> list[Path]:
    return [DOCS_RUNS / name for name in SAMPLE]


def runs() -> list[Path]:
    """The run folders of the sample's bundles."""
    return [run for bundle in bundles() for run in sorted((bundle / "runs").iterdir())]


def one_run(name: str) -> Path:
    """The run folder of a sample bundle of one run."""
    assert name in SAMPLE, f"{name} is not in tests/bundles.py's SAMPLE"
    (run,) = (DOCS_RUNS / name / "runs").iterdir()
    return run


def label(path: Path) -> str:
    """A test id: the path under docs/runs."""
    return str(path.relative_to(DOCS_RUNS))


def kinds(bundle: Path) -> set[tuple[object, ...]]:
    """The kinds of published run a bundle holds (its manifests only are read), and its series' kinds."""
    found: set[tuple[object, ...]] = set()
    for path in sorted((bundle / "runs").glob("*/manifest.json")):
        manifest = json.loads(path.read_text(encoding="utf-8"))
        schema = json.dumps(manifest.get("schema"), sort_keys=True)
        prediction = manifest.get("prediction") is not None
        found.add(("run", manifest.get("scenario"), manifest.get("plan_version"), schema, prediction))
    described = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
    found |= {("series", entry.get("kind")) for entry in described.get("series", [])}
    return found


def plain_copy(source: Path, target: Path) -> Path:
    """A copy of a published bundle or run with its records decompressed: each `NAME.jsonl.zst` back to the
    plain `NAME.jsonl` a run directory holds (and bundles held before publish compressed them); a bundle's
    SHA256SUMS rewritten over its files as they are then."""
    shutil.copytree(source, target)
    for packed in sorted(target.rglob(f"*{ZST}")):
        packed.with_name(packed.name.removesuffix(ZST)).write_bytes(read_content(packed))
        packed.unlink()
    if (target / "SHA256SUMS").is_file():
        write_sums(target)
    return target
