"""`loadproof run ab --scenario load` and `run load --repeats` against the simulator (a real process): two arms
of a tiny load level, 2 runs a side in A B B A order, each run an ordinary run directory in one folder, each arm's
setting in its requests, and the table; then 2 plain repeats and their spread."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.sim.text import tokenizer_path
from tests.integration.sim_process import SimProcess

pytestmark = pytest.mark.timeout(240)

TINY = ["--rate", "8", "-n", "12", "--input-tokens", "128", "--output-tokens", "16", "--idle-timeout-s", "30"]


def loadproof(sim: SimProcess, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "loadproof", "run", *args, "--url", sim.url, "--tokenizer", str(tokenizer_path())]
    return subprocess.run([*argv, "--out", str(out), *TINY], capture_output=True, text=True, timeout=200)


def row(report: str, claim: str) -> list[str]:
    line = next(line for line in report.splitlines() if line.startswith(f"| `{claim}` |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_two_arms_of_a_load_level_interleaved_and_plain_repeats(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        ab = loadproof(sim, tmp_path / "ab", "ab", "--scenario", "load", "--repeats", "2", "--b", "max_tokens=8")
        repeats = loadproof(sim, tmp_path / "repeats", "load", "--repeats", "2")
    assert ab.returncode == 0, ab.stderr[-3000:]
    (folder,) = (tmp_path / "ab").glob("load-ab-*")
    index = json.loads((folder / "repeats.json").read_text())
    assert index["order"] == ["a", "b", "b", "a"] and index["completed"] and len(index["runs"]) == 4
    for line in index["runs"]:
        run = folder / line["run_dir"]
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["scenario"] == "load" and line["measured"]
        tokens = {json.loads(r)["output_tokens"] for r in (run / "requests.jsonl").read_text().splitlines()}
        # arm b sends max_tokens=8 in every body, over the load level's own 16
        assert tokens == ({8} if line["arm"] == "b" else {16}), (line, tokens)
        assert manifest["target"]["extra_body"] == ({"max_tokens": 8} if line["arm"] == "b" else {})
    report = (folder / "report.md").read_text()
    output = row(report, "load.output_tokens_per_s")
    assert len(output[1].split(", ")) == len(output[2].split(", ")) == 2  # each arm's two runs
    assert output[-1] == "B lower, worse"  # half the tokens at the same request rate
    assert "load.ttft_s.p50" in report and "B vs A" in ab.stdout + ab.stderr

    assert repeats.returncode == 0, repeats.stderr[-3000:]
    (plain,) = (tmp_path / "repeats").glob("load-repeats-*")
    runs = [p for p in plain.iterdir() if p.is_dir()]
    assert len(runs) == 2 and all((p / "claims.json").exists() for p in runs)
    spread = row((plain / "report.md").read_text(), "load.output_tokens_per_s")
    assert len(spread[1].split(", ")) == 2 and spread[2].count("[") == 1  # each run, then mean [95%]
