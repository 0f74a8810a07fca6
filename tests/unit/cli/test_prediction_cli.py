"""`plan --simulate ... --prediction-out`, `run ... --prediction` and `tune`: what the command line writes and
refuses, each mistake one line (exit 2) before anything is sent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SIM = """max_model_len = 8192
num_gpu_blocks = 4096
max_num_batched_tokens = 1024
[cost]
step_overhead_s = 0.01
prefill_s_per_token = 0.0001
decode_s_per_seq = 0.001
"""


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=120)


def test_a_load_contract_at_one_rate_and_the_runs_it_refuses(tmp_path: Path):
    sim = tmp_path / "sim.toml"
    sim.write_text(SIM)
    contract = tmp_path / "load.json"
    made = loadproof(
        "plan",
        str(sim),
        "--simulate",
        "load",
        "--rate",
        "4",
        "-n",
        "40",
        "--input-tokens",
        "256",
        "--output-tokens",
        "16",
        "--prediction-out",
        str(contract),
        "--tolerance",
        "15",
    )
    assert made.returncode == 0, made.stderr
    written = json.loads(contract.read_text())
    assert written["scenario"] == "load" and written["tolerance_pct"] == 15
    assert written["options"]["num_requests"] == 40 and written["options"]["rate"] == 4
    assert [f["claim"] for f in written["figures"]] == [
        "load.ttft_s.p50",
        "load.ttft_s.p99",
        "load.tpot_s.p50",
        "load.e2el_s.p50",
        "load.output_tokens_per_s",
    ]
    assert written["sim_profile"]["name"] == "sim.toml" and "concurrent_long_prefills" not in contract.read_text()
    url = "http://127.0.0.1:9"
    other = loadproof(
        "run",
        "load",
        "--url",
        url,
        "--rate",
        "4",
        "-n",
        "41",
        "--input-tokens",
        "256",
        "--output-tokens",
        "16",
        "--prediction",
        str(contract),
        "--out",
        str(tmp_path / "runs"),
    )
    assert other.returncode == 2 and "predicted for num_requests = 40, this run has 41" in other.stderr
    wrong = loadproof("run", "capacity", "--url", url, "--prediction", str(contract), "--out", str(tmp_path / "runs"))
    assert wrong.returncode == 2 and "a prediction of `load`, not of `run capacity`" in wrong.stderr
    for result in (other, wrong):
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_mistakes_are_one_line(tmp_path: Path):
    sim = tmp_path / "sim.toml"
    sim.write_text(SIM)
    cases = [
        (
            ["plan", str(sim), "--simulate", "replay", "--trace", "x", "--prediction-out", "p.json"],
            "a contract is written for --simulate capacity or load",
        ),
        (
            ["plan", str(sim), "--simulate", "load", "--rate", "1,2", "--prediction-out", str(tmp_path / "p.json")],
            "takes one --rate",
        ),
        (["plan", str(sim), "--simulate", "capacity", "--tolerance", "0"], "--tolerance 0: a percentage above 0"),
        (
            ["tune", str(sim), "--sim", str(sim), "--grid", "max_num_seqs=2", "--slo", "ttft=1s"],
            "is a sim profile: tune varies a deployment profile",
        ),
        (
            ["tune", "/nonexistent.toml", "--sim", str(sim), "--grid", "max_num_seqs=2", "--slo", "ttft=1s"],
            "profile not found",
        ),
    ]
    for args, needle in cases:
        result = loadproof(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert needle in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)
