"""`loadproof gate` on the simulator (real processes, as a user runs them): a baseline load run, a rerun of the same
profile on the same engine, and the same run on a deliberately slowed engine, the simulator with twice the decode
step cost. The rerun passes; the slowed run fails with the evidence lines naming each latency that moved, its
change and interval past its budget; the same decisions hold with the baseline taken from a results store
(SQLite, in tmp).

Short runs (4 s of 20 requests/s) on the simulator in real time: the budgets are +25%, wider than the
gate's default, because a rerun on this shared 2-core machine moves by the machine's own noise, which the
runs' intervals do not cover (docs/ci-gate.md, "What the intervals cover"); the slowed engine's latencies
double, far past them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.results.store import open_store
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(120)

# the simulator's step cost (sim/config.py, CostModel): a light prefill, so that at 20 requests/s the engine is
# busy but never saturated and its latencies are its decode steps; the slowed engine: every decode cost doubled
COST = {"step_overhead_s": 0.02, "prefill_s_per_token": 0.00005, "decode_s_per_seq": 0.001}
SLOWED = {**COST, "step_overhead_s": 0.04, "decode_s_per_seq": 0.002}
WORKLOAD = ("--rate", "20", "--duration-s", "4", "--input-tokens", "uniform:64:128", "--output-tokens", "16")
BUDGET = "ttft_p50=+25%,itl_p50=+25%,e2el_p50=+25%"


def gate(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "loadproof", "gate", *args], capture_output=True, text=True, timeout=60
    )
    print(f"$ loadproof gate {' '.join(args)}\n{done.stdout}{done.stderr}exit {done.returncode}")  # -s shows it
    return done


def test_a_rerun_passes_and_a_run_on_a_slowed_engine_fails_with_its_evidence(tmp_path: Path):
    with (
        SimProcess(tmp_path / "sim.log", config={"cost": COST}) as sim,
        SimProcess(tmp_path / "slowed.log", config={"cost": SLOWED}) as slowed,
    ):
        runs = {}
        for name, engine in (("baseline", sim), ("rerun", sim), ("slowed", slowed)):
            code, _, runs[name] = run_scenario(engine, tmp_path / name, "load", *WORKLOAD, "--seed", "3")
            assert code == 0, name

    passed = gate(str(runs["rerun"]), "--baseline", str(runs["baseline"]), "--budget", BUDGET)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    first, *evidence = passed.stdout.splitlines()
    # the three budgets, and the success share, held whatever the budgets name (docs/ci-gate.md)
    assert first == f"gate: PASS: 4 figures within budget against {runs['baseline'].name}"
    assert sum(" budget +25%: PASS (" in line for line in evidence) == 3
    assert (
        sum(line.startswith("  success (load.success_pct): ") and " budget -1pp: PASS (" in line for line in evidence)
        == 1
    )

    result = tmp_path / "gate.json"
    failed = gate(str(runs["slowed"]), "--baseline", str(runs["baseline"]), "--budget", BUDGET, "--json", str(result))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    first, *evidence = failed.stdout.splitlines()
    assert first.startswith("gate: FAIL: ") and first.endswith(f"(against {runs['baseline'].name})")
    for figure, claim in (("itl_p50", "load.itl_s.p50"), ("e2el_p50", "load.e2el_s.p50")):  # each decode step x2
        assert f"{figure} +" in first and "past its +25% budget" in first
        (line,) = [x for x in evidence if x.startswith(f"  {figure} ({claim}): baseline ")]
        assert line.endswith("budget +25%: FAIL (its whole interval is past its +25% budget)"), line
    figures = {f["figure"]: f for f in json.loads(result.read_text())["figures"]}
    assert figures["itl_p50"]["change_interval"][0] > 0.25 and figures["itl_p50"]["fails_gate"]

    # the baseline from a results store: the rerun still passes, the slowed run still fails
    store = tmp_path / "results.db"
    with open_store(str(store)) as opened:
        opened.add(runs["baseline"])
    stored = ("--baseline", "last", "--store", str(store), "--budget", BUDGET)
    assert gate(str(runs["rerun"]), *stored).returncode == 0
    again = gate(str(runs["slowed"]), *stored)
    assert again.returncode == 1 and again.stdout.splitlines()[0] == first
