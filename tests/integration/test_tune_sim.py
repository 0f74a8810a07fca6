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
from pathlib import Path

import pytest

from loadproof.results.store import open_store
from loadproof.sim.text import tokenizer_path
from loadproof.tune.tuning import folder_name
from tests.integration.sim_process import free_port
from tests.polling import wait_until

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
        'max_model_len = 4096\n[serving]\nendpoint = "completions"\nready_timeout_s = 60\n[scheduler]\nmax_num_seqs = 2\n'
    )
    return [
        sys.executable,
        "-m",
        "loadproof",
        "tune",
        str(tmp_path / "deploy.toml"),
        "--sim",
        str(tmp_path / "sim.toml"),
        "--grid",
        "max_num_seqs=1,2,4",
        "--slo",
        "ttft=300ms,tpot=50ms",
        "--rate",
        "8",
        "--search-max",
        "64",
        "--search-resolution",
        "25%",
        "--search-decision",  # the prediction judges the value; 2 s trials could not pass 99% on an interval
        "point",
        "--duration-s",
        "2",
        "--input-tokens",
        "128",
        "--output-tokens",
        "16",
        "--max-real",
        "2",
        "--port",
        str(port),
        "--tokenizer",
        str(tokenizer_path()),
        "-o",
        str(tmp_path / "tune"),
    ]


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


def second_point_ready(folder: Path, first: str) -> Path | None:
    """The folder of the point measured after `first`, once its engine is up."""
    for log in folder.glob("point-*/serve.log"):
        if log.parent.name != folder_name(first) and "[ready]" in log.read_text():
            return log.parent
    return None


def test_a_tune_measures_the_front_first_stops_each_engine_and_resumes_after_an_interrupt(tmp_path: Path):
    port = free_port()
    argv = tune_argv(tmp_path, port)
    store = tmp_path / "results.db"  # the setting that adds every run as it ends: the tune's runs too
    env = {**os.environ, "LOADPROOF_HOME": str(tmp_path / "home"), "LOADPROOF_STORE_AUTO": "1"}
    env["LOADPROOF_STORE"] = str(store)
    folder = tmp_path / "tune"
    journal = folder / "tune.jsonl"
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )

    def searching() -> Path | None:
        """The second real point's folder, once its engine is up and its search has started a trial."""
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        done = lines(journal, "measured")
        second = done and second_point_ready(folder, done[0]["point"])
        return second if second and any(second.glob("runs/load-search-*/**/requests.jsonl")) else None

    # interrupt there, during the second real point
    second = wait_until(searching, 200, lambda: f"the second point's search: {lines(journal, 'measured')}", every_s=0.2)
    first = lines(journal, "measured")[0]["point"]
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole foreground group
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    assert not serving(port), "the interrupted point's engine is still serving"
    assert [e["point"] for e in lines(journal, "measured")] == [first]

    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resuming the tune" in again.stderr and not serving(port)
    measured = [e["point"] for e in lines(journal, "measured")]
    assert measured[0] == first and folder_name(measured[1]) == second.name and len(measured) == 2
    assert len(list((folder / folder_name(first) / "runs").glob("load-search-*"))) == 1  # not measured again
    results = {r["point"]: r for r in json.loads((folder / "tune.json").read_text())["points"]}
    predicted = {name: r["predicted"]["max_rate_rps"] for name, r in results.items()}
    assert predicted["max_num_seqs=4"] > predicted["max_num_seqs=2"] > predicted["max_num_seqs=1"]  # more at once
    assert first == max(predicted, key=predicted.get)  # the highest predicted rate is on the front: measured first
    (left,) = set(results) - set(measured)
    assert results[left]["measured"] is None and results[left]["pruned"] == "budget: --max-real 2"
    for name in measured:
        # the point's limit reached the engine: the simulator's startup line says what it runs with
        seqs = name.split("=")[1]
        assert f"max_num_seqs {seqs}," in (folder / folder_name(name) / "serve.log").read_text()
        real = results[name]["measured"]["max_rate_rps"]
        assert real is not None and 0.5 * predicted[name] <= real <= 1.5 * predicted[name], (name, predicted, real)
    assert (folder / "pareto.svg").is_file() and first in (folder / "tune.md").read_text()
    trials = {p.parent.name for p in folder.glob("*/runs/load-search-*/load-*/claims.json")}
    with open_store(str(store)) as opened:
        stored = {r.run_id for r in opened.query()}
    assert trials and trials <= stored, (trials, stored)  # the interrupted run's finished trials and the resumed
