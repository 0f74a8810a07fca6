"""One report page of every kind, built from the published runs under docs/runs (their reports regenerated
from the stored records) or, where no published run has the kind, from a synthetic run: what the Chromium
test (tests/integration/test_report_html_chromium.py) opens and what scripts/report-screenshots.py photographs
for the docs (docs/img/report-<scenario>.png).

`build(case, root)` writes the case's folder under `root` and returns the page to open: a run's report.html,
a rate search's, a folder's index.html, or a comparison's page.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadproof.metrics import compute_claims
from loadproof.metrics.slo import slo_text
from loadproof.records import RequestRecord
from loadproof.report.build import build_report
from loadproof.report.compare import build_side, compare
from loadproof.report.compare_html import render_compare_html
from loadproof.report.index import build_index
from loadproof.rundir import EngineSample
from loadproof.rundir.series import RateSearch, SearchTrial
from loadproof.scenarios.load.series import report_series
from loadproof.store.run_dir import RunWriter, load_run
from loadproof.store.series import SEARCH_JSON, write_document
from tests.bundles import DOCS_RUNS
from tests.unit.publish.synthetic import telemetry_rows
from tests.unit.report.synthetic import stream

S = 1_000_000_000

# case -> the published bundle it regenerates (docs/runs/<host>/<name>; a run case takes its one run)
REAL = {
    "throughput": "h200-2026-11-30/llama-throughput",
    "throughput-2gpu": "h200x2-2026-11-30/mla-pp2-throughput",
    "load": "h200-2026-12-01/mla-2l-load-constant-20rps",
    "replay": "h200-2026-12-01/mla-2l-replay-mooncake",
    "sessions": "h200-2026-12-02-offload/sessions-offload-r1",
    "capacity-pass": "h200-2026-11-30/llama-capacity-7x120k",
    "capacity-fail": "h200-2026-11-30/llama-capacity-8x120k",
    "capacity-64-streams": "h200-2026-11-30/gemma-capacity-64x16k",
    "capacity-search-trial": "h200-2026-11-30/gemma-1gib-capacity-search-29x8k",
    "capacity-engine-crash": "h200x2-2026-11-30/mla-pp2-capacity-24x190k-rope-crash",
    "capacity-1m-tokens": "h200x2-2026-11-30/mla-pp2-capacity-3x1m",
    "prefill": "h200-2026-11-30/llama-prefill-130k",
    "interference": "h200-2026-11-30/llama-interference",
    "quality": "h200-2026-11-30/gemma-quality",
}
SEARCH = "load-search"  # the rate search's folder page, its search.json rebuilt from the bundle's series entry
SEARCH_BUNDLE = "h200-2026-12-01/mla-2l-load-search"
INDEX = "index"  # a folder of runs: its index.html
COMPARE = "compare"  # `loadproof compare BASE CAND --out FILE.html`: drafts off against drafts on
COMPARE_BUNDLES = ("h200-2026-12-02/load-slo-nodraft", "h200-2026-12-02/load-slo-ngram")
INDEX_CASES = ("throughput", "load", "capacity-pass", "prefill", "soak")
CASES = [*REAL, "soak", "ab", SEARCH, INDEX, COMPARE]

# the page each scenario's docs screenshot shows (docs/img/report-<name>.png)
DOC_IMAGES = {
    "load": "load",
    "load-search": SEARCH,
    "throughput": "throughput",
    "replay": "replay",
    "sessions": "sessions",
    "capacity": "capacity-pass",
    "prefill": "prefill",
    "interference": "interference",
    "soak": "soak",
    "quality": "quality",
    "ab": "ab",
    "index": INDEX,
    "compare": COMPARE,
}


def _write(
    root: Path, name: str, manifest: dict[str, Any], records: list[RequestRecord], samples: Sequence[EngineSample] = ()
) -> Path:
    with RunWriter(root / name) as writer:
        writer.write_manifest(
            {
                "run_id": name,
                "target": {"model": "gemma-3-270m", "endpoint": "completions"},
                "start_wall_time": "2026-11-30T10:00:00Z",
                "end_wall_time": "2026-11-30T10:05:00Z",
                **manifest,
            }
        )
        for record in records:
            writer.append(record)
        for sample in samples:
            writer.metric_sample(sample)
    (root / name / "telemetry.jsonl").write_text("".join(json.dumps(r) + "\n" for r in telemetry_rows()))
    return root / name


def soak_run(root: Path) -> Path:
    """Two families over 40 s, one request timed out, the engine's memory sampled: a FAIL on errors."""
    records = [
        stream(
            f"soak-{i}",
            send=i * 2.0,
            first=i * 2.0 + 0.12 + 0.03 * (i % 5) + (0.4 if i % 3 == 0 else 0),
            rate=40.0 if i < 10 else 36.0,
            tokens=60 if i % 3 else 20,
            family="long" if i % 3 == 0 else "short",
            scenario="soak",
            ok=i != 7,
        )
        for i in range(20)
    ]
    samples = [
        EngineSample(t_ns=i * 10 * S, source="engine", values={"process_rss_bytes": (2048 + 3 * i) * 1024**2})
        for i in range(5)
    ]
    plan = {
        "clients": 2,
        "duration_s": 40,
        "long_every": 3,
        "long_requests": True,
        "max_error_rate": 0.0,
        "max_latency_drift": 0.25,
        "max_rss_growth_mib": 100.0,
    }
    return _write(root, "soak-synthetic", {"scenario": "soak", "plan": plan}, records, samples)


def ab_run(root: Path) -> Path:
    """Six rounds of two arms, arm b about 20% faster; both arms generate the same lengths."""
    order = [["a", "b"], ["b", "a"], ["b", "a"], ["a", "b"], ["a", "b"], ["b", "a"]]
    records = [
        stream(
            f"ab-{r}-{arm}-{k}",
            send=r * 20.0 + pos * 10 + k,
            first=r * 20.0 + pos * 10 + k + (0.2 if arm == "a" else 0.17) + 0.01 * ((r * 3 + k) % 4),
            rate=(10.0 if arm == "a" else 12.0) + k * 0.3 + 0.4 * ((r * 7) % 3),
            tokens=40,
            scenario="ab",
            family=arm,
            repeat=r,
            batch=pos,
            prompt_id=f"english-{k:02d}",
        )
        for r, arms in enumerate(order)
        for pos, arm in enumerate(arms)
        for k in range(3)
    ]
    target = {"url": "http://127.0.0.1:8000", "model": "m", "endpoint": "completions"}
    plan = {
        "arms": {
            "a": {"target": target, "settings": {"temperature": 0.0}},
            "b": {"target": target, "settings": {"temperature": 0.7}},
        },
        "order": order,
        "order_seed": 7,
        "prompts": [f"english-{k:02d}" for k in range(3)],
        "family": "english",
        "bootstrap_seed": 20240607,
        "resamples": 2000,
    }
    return _write(root, "ab-synthetic", {"scenario": "ab", "plan": plan}, records)


def published_run(bundle: str, path: Path) -> Path:
    """A copy of the bundle's one run at `path`."""
    (published,) = (DOCS_RUNS / bundle / "runs").iterdir()
    shutil.copytree(published, path)
    return path


def run_dir(case: str, root: Path) -> Path:
    """The case's run directory under `root` with its report regenerated as `loadproof report` does."""
    if case == "soak":
        path = soak_run(root)
    elif case == "ab":
        path = ab_run(root)
    else:
        path = published_run(REAL[case], root / case)
    build_report(path)
    return path


class _Quiet:
    """The console of `report_series`, saying nothing."""

    def say(self, text: str) -> None:
        pass

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        pass

    def result(self, text: str) -> None:
        pass


def search_folder(root: Path) -> Path:
    """The published rate search as its command left it: its trials' run directories and a search.json
    naming them (what a bundle keeps of it: the trial list and the target), then `loadproof report FOLDER`."""
    bundle = DOCS_RUNS / SEARCH_BUNDLE
    (entry,) = json.loads((bundle / "bundle.json").read_text())["series"]
    folder = root / entry["series_id"]
    folder.mkdir(parents=True)
    trials = []
    options: dict[str, Any] = {}
    for index, run in enumerate(entry["runs"]):
        shutil.copytree(bundle / run, folder / Path(run).name)
        manifest = json.loads((bundle / run / "manifest.json").read_text())
        options = manifest["options"]
        trials.append(
            SearchTrial(rate_rps=manifest["plan"]["rate_rps"], passed=False, index=index, run_dir=Path(run).name)
        )
    slo = {k: float(v) for k, v in options["slo"].items()}
    search = RateSearch(
        slo=slo,
        slo_text=slo_text(slo),
        attainment=entry["attainment"],
        resolution=options["search_resolution"],
        resolution_relative=float(options["search_resolution"].rstrip("%")) / 100,
        start_rps=options["rate"],
        maximum_rps=options["search_max"],
        options=options,
        trials=trials,
        completed=True,
    )
    write_document(folder / SEARCH_JSON, search)
    shutil.copyfile(bundle / entry["path"] / "claims.json", folder / "claims.json")
    report_series(folder, _Quiet())
    return folder


def index_folder(root: Path) -> Path:
    """A folder of runs of several scenarios (and a rate search), as `loadproof report FOLDER` indexes it."""
    folder = root / "runs"
    folder.mkdir(parents=True)
    for case in INDEX_CASES:
        if case == "soak":
            soak_run(folder)
        else:
            published_run(REAL[case], folder / case)
    search_folder(folder)
    build_index(folder)
    return folder


def compare_page(root: Path) -> Path:
    """The comparison of two published load runs as `loadproof compare BASE CAND --out compare.html` writes it."""
    base, cand = (published_run(bundle, root / Path(bundle).name) for bundle in COMPARE_BUNDLES)
    sides = [build_side(path.name, [load_run(path)], compute_claims) for path in (base, cand)]
    page = root / "compare.html"
    page.write_text(render_compare_html(compare(sides[1], sides[:1], max_slowdown=0.1)), encoding="utf-8")
    return page


def build(case: str, root: Path) -> Path:
    """The page of `case`, written under `root`."""
    if case == COMPARE:
        return compare_page(root)
    if case == SEARCH:
        return search_folder(root) / "report.html"
    if case == INDEX:
        return index_folder(root) / "index.html"
    return run_dir(case, root) / "report.html"
