"""A scenario added through the catalog alone gets every generic command: the example scenario
(tests/unit/example_scenario: scenario, plan, metrics, catalog entry, docs section) runs against the
simulator, then `report` (report.md and report.html), `compare`, `export`, `publish` and `verify` work on
its runs, none of them changed for it. Every command runs as `loadproof` does, with the entry in the
catalog (`python -m tests.unit.example_scenario ...`)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.sim.config import CostModel, dump_sim_config
from tests.integration.sim_process import SimProcess
from tests.unit.example_scenario import DOCS, NAME
from tests.unit.example_scenario.predict import TESTS_PROFILE

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.unit.example_scenario", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def claims_of(run: Path) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads((run / "claims.json").read_text())["claims"]}


def test_the_example_scenario_gets_report_html_compare_export_publish_and_verify(tmp_path: Path):
    runs_dir = tmp_path / "runs"
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        for _ in range(2):
            done = loadproof("run", NAME, "--url", sim.url, "--out", str(runs_dir), "--requests", "3", "--rounds", "2")
            assert done.returncode == 0, done.stderr[-3000:]
    base, cand = sorted(runs_dir.glob(f"{NAME}-*"))

    # the run reported itself: its claims, documented in its docs section, its table and its plot
    claims = claims_of(cand)
    assert claims["example.requests"]["value"] == 6 and claims["example.verdict"]["value"] == "PASS"
    assert claims["example.decode_tokens_per_s"]["value"] > 0
    docs = DOCS.read_text(encoding="utf-8")
    assert [name for name in claims if name.startswith("example.") and f"`{name}`" not in docs] == []
    done = loadproof("report", str(cand))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0].startswith("example PASS"), done.stdout  # its headline: the verdict first
    assert "Example requests" not in done.stdout  # its tables: with -v
    done = loadproof("-v", "report", str(cand))
    assert "Example requests" in done.stdout  # the scenario's table, on the console
    markdown = (cand / "report.md").read_text(encoding="utf-8")
    table = markdown.split("## Example requests\n", 1)[1].split("\n## ", 1)[0]
    assert table.count("| ex-") == 6 and "One row per request, in the order sent." in table
    html = (cand / "report.html").read_text(encoding="utf-8")
    titles = re.findall(r"<svg[^>]*>\s*<title>([^<]*)</title>", html)
    assert titles[:2] == ["Example TTFT by request", "TTFT distribution (6 requests)"]

    # compare: the two runs side by side, 2 rounds a side split as repeats (its entry says it may)
    done = loadproof("compare", str(base), str(cand))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "example.decode_tokens_per_s" in done.stdout and "ACCEPT" in done.stdout
    assert "95% CI" in done.stdout  # two repeats on each side

    # export: every table, the scenario named in export.json
    done = loadproof("export", str(cand), "--out", str(tmp_path / "export"))
    assert done.returncode == 0, done.stderr[-3000:]
    exported = json.loads((tmp_path / "export" / "export.json").read_text())
    assert exported["scenario"] == NAME
    with open(tmp_path / "export" / "requests.csv", encoding="utf-8") as handle:
        assert sum(1 for row in csv.DictReader(handle) if row["scenario"] == NAME) == 6

    # publish both runs, then verify the bundle offline
    bundle = tmp_path / "bundle"
    done = loadproof("publish", str(base), str(cand), "--out", str(bundle))
    assert done.returncode == 0, done.stderr[-3000:]
    done = loadproof("verify", str(bundle))
    assert done.returncode == 0 and "VERIFIED" in done.stdout, done.stdout[-3000:]
    published = json.loads(next(bundle.glob(f"runs/*{cand.name}*/manifest.json")).read_text())["plan"]
    assert published["rounds"][0] == ["ex-0-0", "ex-0-1", "ex-0-2"]  # declared names are kept


def test_the_example_scenario_is_predicted_and_its_run_judged_by_the_contract(tmp_path: Path):
    """Through its catalog entry alone: `plan SIM --simulate example --prediction-out` writes its contract, and
    its run on the simulator (the same sim profile, in real time) is judged figure by figure and passes: each
    figure within 25%. The tests' profile with steps four times as long: HTTP and a loaded machine added 27 ms
    to its 70 ms TTFT in a fresh-clone suite (2026-12-05), beside 280 ms they are within the tolerance."""
    profile = tmp_path / "sim.toml"
    slow = CostModel(step_overhead_s=0.2, prefill_s_per_token=0.004, decode_s_per_seq=0.004)
    profile.write_text(dump_sim_config(TESTS_PROFILE.model_copy(update={"cost": slow})))
    contract = tmp_path / "example.json"
    options = ["--requests", "2", "--rounds", "2", "--max-tokens", "8"]
    made = ["plan", str(profile), "--simulate", NAME, *options, "--prediction-out", str(contract), "--tolerance", "25"]
    done = loadproof(*made)
    assert done.returncode == 0, done.stderr[-3000:]
    with SimProcess(tmp_path / "sim.log", "--config", str(profile)) as sim:
        runs_dir = tmp_path / "runs"
        argv = ["run", NAME, "--url", sim.url, "--out", str(runs_dir), *options, "--prediction", str(contract)]
        done = loadproof(*argv)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        refused = loadproof(*argv[:-2], "--rounds", "3", "--prediction", str(contract))
    assert refused.returncode == 2 and "predicted for rounds = 2, this run has 3" in refused.stderr
    (run,) = runs_dir.glob(f"{NAME}-*")
    claims = claims_of(run)
    assert claims["prediction.verdict"]["value"] == "PASS"
    for name in ("example.ttft_median_s", "example.decode_tokens_per_s"):
        assert abs(claims[f"prediction.{name}.error_pct"]["value"]) <= 25, claims[f"prediction.{name}.error_pct"]
