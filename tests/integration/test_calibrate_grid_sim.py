"""`loadproof sim calibrate --grid` against the simulator as a real process: each grid point is a capacity run
made in the calibrating process itself (the run lifecycle, as `loadproof run capacity` makes it, never
`loadproof` started again through argv), with `--grid-arg` read by that command's own options, and the sim
profile is fitted to the runs it made."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from loadproof.results.store import open_store
from loadproof.sim.text import tokenizer_path
from tests.integration.sim_process import SimProcess

pytestmark = pytest.mark.timeout(180)


def calibrate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "loadproof", "sim", "calibrate", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=150, env=env)


def test_the_grid_runs_each_point_in_process_and_fits_the_profile(tmp_path: Path):
    runs, out = tmp_path / "runs", tmp_path / "sim.toml"
    store = tmp_path / "results.db"  # the setting that adds every run as it ends: the grid's runs too
    env = {**os.environ, "LOADPROOF_STORE_AUTO": "1", "LOADPROOF_STORE": str(store)}
    with SimProcess(tmp_path / "sim.log", "--time-scale", "20") as sim:
        done = calibrate(
            *("--grid", "--url", sim.url, "--tokenizer", str(tokenizer_path())),
            *("--concurrency", "1,2", "--context", "256", "--window-s", "1", "--runs-out", str(runs)),
            *("--grid-arg=--sample-interval-s=0.2", "--grid-arg", "--max-tokens", "--grid-arg", "200"),
            *("--max-model-len", "8192", "--kv-tokens", "131072", "-o", str(out)),
            env=env,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        wrong = calibrate("--grid", "--url", sim.url, "--tokenizer", str(tokenizer_path()), "--grid-arg=--bogus")
    assert (
        wrong.returncode == 2
        and wrong.stderr.strip() == "error: --grid-arg --bogus: a capacity run has no option --bogus"
    )
    made = sorted(runs.iterdir())
    assert len(made) == 2 and all(p.name.startswith("capacity-") for p in made)
    with open_store(str(store)) as opened:
        assert sorted(r.run_id for r in opened.query()) == [p.name for p in made]
    assert "results store: 2 run(s) added" in done.stdout + done.stderr
    assert "grid: 1 session(s) x 256 tokens" in done.stdout and "grid: 2 session(s) x 256 tokens" in done.stdout
    assert all(f"used: prefill fit: {p.name} first of" in done.stdout for p in made)
    profile = tomllib.loads(out.read_text())
    assert profile["max_model_len"] == 8192 and profile["cost"]["step_overhead_s"] > 0
