"""The scenarios' failure cases, played by the simulator (a real process on 127.0.0.1).

A real engine cannot be made to preempt, to leave a session waiting, or to answer wrongly on demand;
the simulator can. Each test runs `loadproof run ...` as a user would and reads the verdict from the
run directory. One test also checks the simulator against itself: the HTTP server on its scaled clock
and the virtual-clock prediction of the same capacity run must agree.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadproof.metrics.capacity import evaluate_capacity
from loadproof.predict.capacity import predict_capacity
from loadproof.sim.config import SimConfig
from loadproof.sim.text import tokenizer_path
from tests.integration.sim_process import SimProcess

pytestmark = pytest.mark.timeout(120)

SCALE = 10.0  # modeled seconds per wall second


def run_scenario(sim: SimProcess, out: Path, scenario: str, *args: str) -> tuple[int, dict[str, Any], Path]:
    argv = [
        sys.executable,
        "-m",
        "loadproof",
        "run",
        scenario,
        "--url",
        sim.url,
        "--tokenizer",
        str(tokenizer_path()),
        "--out",
        str(out),
        *args,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=110)
    runs = sorted(out.glob(f"{scenario}-*"))
    assert runs, proc.stderr[-2000:]
    assert (runs[-1] / "claims.json").exists(), f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    claims = {c["name"]: c for c in json.loads((runs[-1] / "claims.json").read_text())["claims"]}
    return proc.returncode, claims, runs[-1]


def test_capacity_passes_and_the_server_agrees_with_the_virtual_clock(tmp_path: Path):
    config = {"time_scale": SCALE, "max_model_len": 8192, "num_gpu_blocks": 4096}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        code, claims, _ = run_scenario(
            sim,
            tmp_path,
            "capacity",
            "--sessions",
            "4",
            "--input-tokens",
            "2048",
            "--window-s",
            "2",
            "--max-gap-s",
            "1",
        )
    assert code == 0, claims["capacity.verdict"]
    assert claims["capacity.probes_retrieved"]["value"] == 4
    pred = predict_capacity(SimConfig(**config), 4, 2048, 2.0 * SCALE)
    predicted = {c.name: c.value for c in evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events).claims}
    for name in ("capacity.cold_ttft_median_s", "capacity.cold_ttft_max_s"):
        measured_modeled = claims[name]["value"] * SCALE
        assert measured_modeled == pytest.approx(predicted[name], rel=0.10), name


def test_a_capacity_run_shows_its_phases_as_plain_lines_with_the_engines_figures(tmp_path: Path):
    """stderr is not a terminal here: the live view prints each phase's final line, no escape codes. With
    the engine's KV size known (the sim's startup line, read through a sim profile) the cold phase also
    says what the KV cache holds."""
    config = {"time_scale": SCALE, "max_model_len": 8192, "num_gpu_blocks": 4096}
    profile = tmp_path / "sim.toml"
    profile.write_text(
        'name = "sim"\nengine = "sim"\n[model]\npath = "sim"\nserved_name = "sim"\n'
        'max_model_len = 8192\n[serving]\nendpoint = "chat"\n'
    )
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        argv = [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "capacity",
            "--url",
            sim.url,
            "--tokenizer",
            str(tokenizer_path()),
            "--out",
            str(tmp_path),
            "--profile",
            str(profile),
            "--startup-log",
            str(sim.log),
            "--sessions",
            "4",
            "--input-tokens",
            "2048",
            "--window-s",
            "2",
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\x1b[" not in proc.stderr
    lines = {line.split(" ended after ")[0]: line for line in proc.stderr.splitlines() if " ended after " in line}
    cold, window, drain = lines["capacity cold phase"], lines["capacity window"], lines["capacity drain"]
    assert "sessions sent 4/4, first tokens 4/4 (client)" in cold
    assert re.search(r"engine: running 4, waiting 0, KV \d+%", cold), cold
    assert "prompt tokens completed 8,192/8,192 (engine counter" in cold
    assert re.search(r"~[\d,]+ in the KV cache \(estimate from KV usage", cold), cold
    rates = re.search(
        r"0:02 measured; per stream ([\d.,]+) / [\d.,]+ / ([\d.,]+) tokens/s \(min / median / max over "
        r"4\), together ([\d.,]+) tokens/s; engine: running 4, waiting 0",
        window,
    )
    assert rates, window
    assert "engine at the end: running 0, waiting 0" in drain
    # the window's live figures are the report's, from the same chunks
    run = next(tmp_path.glob("capacity-*"))
    claims = {c["name"]: c["value"] for c in json.loads((run / "claims.json").read_text())["claims"]}
    shown = [float(x.replace(",", "")) for x in rates.groups()]
    for value, name in zip(shown, ("min_tokens_per_s", "max_tokens_per_s")):
        assert value == pytest.approx(claims[f"capacity.window_per_stream_{name}"], abs=0.051), name
    assert shown[2] == pytest.approx(claims["capacity.window_aggregate_tokens_per_s"], abs=0.051)


def test_one_session_more_than_max_num_seqs_fails_for_that_reason(tmp_path: Path):
    config = {"time_scale": SCALE, "max_model_len": 8192, "max_num_seqs": 3}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        code, claims, _ = run_scenario(
            sim,
            tmp_path,
            "capacity",
            "--sessions",
            "4",
            "--input-tokens",
            "1024",
            "--window-s",
            "1",
            "--admission-stall-s",
            "1",
        )
    assert code == 1
    assert claims["capacity.criteria.all_streams_started"]["value"] == "FAIL"
    evidence = claims["capacity.criteria.all_streams_started"]["formula"]
    assert "3/4" in evidence
    assert claims["capacity.criteria.waiting"]["value"] == "FAIL"


def test_kv_exhaustion_shows_as_preemptions(tmp_path: Path):
    # 4 x 1024-token prompts fit (4 x 64 blocks of 16 = 256 of 300 blocks), their growth does not
    config = {"time_scale": SCALE, "max_model_len": 4096, "num_gpu_blocks": 300, "reserve_full_sequence": False}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        code, claims, _ = run_scenario(
            sim, tmp_path, "capacity", "--sessions", "4", "--input-tokens", "1024", "--window-s", "3"
        )
    assert code == 1
    assert claims["capacity.criteria.preemptions"]["value"] == "FAIL"


def test_wrong_answers_fail_the_probes(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", "--fault", "wrong_answer", config={"time_scale": SCALE}) as sim:
        code, claims, _ = run_scenario(
            sim, tmp_path, "capacity", "--sessions", "2", "--input-tokens", "1024", "--window-s", "1"
        )
    assert code == 1
    assert claims["capacity.criteria.probes"]["value"] == "FAIL"
    assert claims["capacity.probes_retrieved"]["value"] == 0


def test_a_hung_engine_ends_a_prefill_repeat_at_its_deadline(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", "--fault", "hang", config={"time_scale": SCALE}) as sim:
        code, claims, run = run_scenario(sim, tmp_path, "prefill", "-l", "1024", "-r", "1", "--deadline-s", "2")
    assert code == 4  # its one request timed out: the run measured nothing, and says why
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert records and not records[0]["ok"] and records[0]["error_kind"] == "timeout"
    assert "most frequent (1x): no complete answer within 2 s" in (run / "report.md").read_text()


def test_interference_newcomer_waits_for_its_own_prefill(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": SCALE, "max_model_len": 16384}) as sim:
        code, claims, _ = run_scenario(
            sim,
            tmp_path,
            "interference",
            "--sessions",
            "2",
            "--session-tokens",
            "1024",
            "--newcomer-tokens",
            "6144",
            "--window-s",
            "1",
        )
    # the newcomer's 6,144 tokens cost >= 6.144 modeled seconds of prefill (1 ms a token by default)
    assert claims["interference.newcomer_ttft_s"]["value"] * SCALE >= 6.144
    assert claims["interference.during_tokens_per_s"]["value"] < claims["interference.before_tokens_per_s"]["value"]
    assert code == 0, {k: v["value"] for k, v in claims.items() if ".criteria." in k}
