"""A run that measured nothing says so, first, in the engine's own words, and exits 4; a run that partly
failed names its most frequent error. Played by the simulator (a real process) answering HTTP 500 to every
request (`--fault http_500`), or to every request after the first few.

The generic part, not any scenario's: the run lifecycle (`scenarios.recording.conclude`), the report
(`report.failures`) and the console. So every scenario that sends requests is covered by the same code; four
of them are run here as a user would run them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.sim.text import tokenizer_path
from tests.integration.sim_process import SimProcess

pytestmark = pytest.mark.timeout(240)

SAID = "HTTP 500: simulated internal error"  # the simulator's answer under its http_500 fault
SCENARIOS = {
    "load": ["--endpoint", "completions", "--rate", "4", "-n", "3", "--input-tokens", "64", "--output-tokens", "8"],
    "throughput": ["--families", "english", "--concurrency", "1", "--num-prompts", "3", "--max-tokens", "8"],
    "prefill": ["-l", "256", "-r", "3"],
    "capacity": ["--sessions", "3", "--input-tokens", "512", "--window-s", "1"],
}


def loadproof_run(sim: SimProcess, out: Path, scenario: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "loadproof", "run", scenario, "--url", sim.url, "--out", str(out)]
    argv += ["--tokenizer", str(tokenizer_path()), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=200)


def test_every_scenario_whose_requests_all_failed_says_so_first_and_exits_4(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", "--fault", "http_500") as sim:
        for scenario, args in SCENARIOS.items():
            out = tmp_path / scenario
            result = loadproof_run(sim, out, scenario, *args)
            assert result.returncode == 4, f"{scenario}: {result.returncode}\n{result.stderr[-3000:]}"
            (run,) = out.glob(f"{scenario}-*")
            records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
            n = len(records)
            assert n >= 3 and not any(r["ok"] for r in records), scenario
            said = f"the run measured nothing: {n} of {n} requests failed; most frequent ({n}x): {SAID}"
            assert result.stdout.splitlines()[0] == said[0].upper() + said[1:], (scenario, result.stdout[:500])
            assert result.stderr.strip().splitlines()[-1] == f"error: {scenario}: {said}", result.stderr[-2000:]
            report = (run / "report.md").read_text().splitlines()
            assert report[2:5] == ["## Measured nothing", "", said[0].upper() + said[1:]], (scenario, report[:6])
            html = (run / "report.html").read_text()
            assert html.index("<h2>Measured nothing</h2>") < html.index(SAID) < html.index("<ul>"), scenario


def test_a_run_that_partly_failed_names_the_most_frequent_error(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log") as sim:
        sim.set_faults("http_500", after_requests=3)  # the first three are served, then every one refused
        result = loadproof_run(
            sim, tmp_path, "load", "--endpoint", "completions", "--rate", "4", "-n", "6", "--input-tokens", "64",
            "--output-tokens", "8",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = tmp_path.glob("load-*")
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    failed = sum(not r["ok"] for r in records)
    assert 0 < failed < len(records) == 6
    line = f"6 requests recorded, {failed} failed; most frequent ({failed}x): {SAID}"
    assert result.stdout.splitlines()[0] == f"load: {line}", result.stdout[:1000]  # the headline's first line
    assert "measured nothing" not in result.stdout + result.stderr
    assert line in (run / "report.md").read_text()


def test_a_search_none_of_whose_trials_measured_anything_exits_4_with_the_engines_words(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", "--fault", "http_500") as sim:
        result = loadproof_run(
            sim, tmp_path, "capacity", "--sessions", "1", "--input-tokens", "256", "--window-s", "1",
            "--search", "sessions", "--search-max", "2",
        )  # fmt: skip
    assert result.returncode == 4, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: capacity search: no trial measured anything; the last: the run measured nothing")
    assert last.endswith(f"most frequent (1x): {SAID}"), last
