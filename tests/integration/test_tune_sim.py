"""`loadproof tune` measuring for real, through the CLI: each real point is `loadproof serve` on the point's
profile (the simulator as its engine, a real process on 127.0.0.1, restarted per point with the point's
scheduler limits), a `run load --search rate` against it, and a stop; interrupted during the second real
point and resumed by the same command. The simulator predicting itself on the virtual clock and serving on
the wall clock gives the same search, within a machine's noise. The embedded engine's tune is in
docs/simulator.md ("Tuning"): its engine takes minutes a start, too long for the suite."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadproof.sim.text import tokenizer_path
from tests.integration.sim_process import free_port

pytestmark = pytest.mark.timeout(300)

SIM = """model = "tiny"
max_model_len = 4096
block_size = 16
num_gpu_blocks = 4096
max_num_seqs = 8
max_num_batched_tokens = 2048
time_scale = 1.0

[cost]
step_overhead_s = 0.004
prefill_s_per_token = 0.00001
decode_s_per_seq = 0.001
"""


def tune_argv(tmp_path: Path, port: int) -> list[str]:
    (tmp_path / "sim.toml").write_text(SIM)
    (tmp_path / "deploy.toml").write_text(
        f'name = "sim-tune"\nengine = "sim"\n[model]\npath = "{tmp_path / "sim.toml"}"\nserved_name = "tiny"\n'
        'max_model_len = 4096\n[serving]\nendpoint = "completions"\nready_timeout_s = 60\n[scheduler]\nmax_num_seqs = 2\n')
    return [sys.executable, "-m", "loadproof", "tune", str(tmp_path / "deploy.toml"), "--sim", str(tmp_path / "sim.toml"),
            "--grid", "max_num_seqs=1,2,4", "--slo", "ttft=300ms,tpot=50ms", "--rate", "4", "--search-max", "64",
            "--search-resolution", "25%", "--duration-s", "3", "--input-tokens", "128", "--output-tokens", "16",
            "--max-real", "2", "--port", str(port), "--tokenizer", str(tokenizer_path()), "-o", str(tmp_path / "tune")]


def lines(path: Path, kind: str) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("kind") == kind:
            out.append(entry)
    return out


def serving(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_tune_measures_the_front_first_stops_each_engine_and_resumes_after_an_interrupt(tmp_path: Path):
    port = free_port()
    argv = tune_argv(tmp_path, port)
    env = {**os.environ, "LOADPROOF_HOME": str(tmp_path / "home")}
    journal, second = tmp_path / "tune" / "tune.jsonl", tmp_path / "tune" / "point-max_num_seqs-2" / "serve.log"
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 200
    # the second real point's engine is up and its search has started: interrupt there
    while not (second.is_file() and "[ready]" in second.read_text() and lines(journal, "measured")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole foreground group
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    assert not serving(port), "the interrupted point's engine is still serving"
    assert [e["point"] for e in lines(journal, "measured")] == ["max_num_seqs=4"]  # the predicted front first

    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming the tune" in again.stderr and not serving(port)
    measured = {e["point"]: e for e in lines(journal, "measured")}
    assert list(measured) == ["max_num_seqs=4", "max_num_seqs=2"]
    first = tmp_path / "tune" / "point-max_num_seqs-4"
    assert len(list((first / "runs").glob("load-search-*"))) == 1  # not measured again
    results = {r["point"]: r for r in json.loads((tmp_path / "tune" / "tune.json").read_text())}
    assert results["max_num_seqs=1"]["measured"] is None and results["max_num_seqs=1"]["pruned"] == "budget: --max-real 2"
    for name, seqs in (("max_num_seqs=4", 4), ("max_num_seqs=2", 2)):
        # the point's limit reached the engine: the simulator's startup line says what it runs with
        log = (tmp_path / "tune" / f"point-max_num_seqs-{seqs}" / "serve.log").read_text()
        assert f"max_num_seqs {seqs}," in log
        predicted, real = results[name]["predicted"]["max_rate_rps"], results[name]["measured"]["max_rate_rps"]
        assert real is not None and 0.5 * predicted <= real <= 1.5 * predicted, (name, predicted, real)
    # more sequences at once: a higher predicted rate, and the grid's ordering is what made 4 the front
    assert results["max_num_seqs=4"]["predicted"]["max_rate_rps"] > results["max_num_seqs=2"]["predicted"]["max_rate_rps"]
    assert (tmp_path / "tune" / "pareto.svg").is_file() and "max_num_seqs=4" in (tmp_path / "tune" / "tune.md").read_text()
