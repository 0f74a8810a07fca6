"""`loadproof profiles` lists the packaged profiles, and every command that takes a profile takes one's name:
`serve NAME`, `plan NAME` (and `--sim NAME`), `sim predict-NAME NAME`, `tune NAME --sim NAME`, `run --profile
NAME`; a name of nothing is one line (exit 2) listing the names."""

from __future__ import annotations

import json
import subprocess
import sys
from hashlib import sha256
from importlib import resources
from pathlib import Path

from loadproof.config.profile import packaged_listing
from loadproof.tune.options import tune_request
from loadproof.tune.tuning import predict_point, spec

PROFILES = Path(str(resources.files("loadproof") / "profiles"))
SMALL = Path(str(resources.files("loadproof") / "data" / "sim" / "small.toml"))


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=120)


def test_profiles_lists_each_packaged_profile_with_its_description():
    result = loadproof("profiles")
    assert result.returncode == 0, result.stderr
    width = max(len(name) for name, _ in packaged_listing())
    assert result.stdout.splitlines() == [f"{name.ljust(width)}  {text}" for name, text in packaged_listing()]
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert {"embedded", "embedded-pd", "embedded-tools", "sim-small"} <= set(names)


def test_serve_dry_runs_a_packaged_profile_by_name_as_by_its_path():
    by_name = loadproof("serve", "embedded-pd", "--dry-run")
    assert by_name.returncode == 0, by_name.stderr
    assert "# on the prefill instance:" in by_name.stdout and "loadproof relay --upstream" in by_name.stdout
    assert by_name.stdout == loadproof("serve", str(PROFILES / "embedded-pd.toml"), "--dry-run").stdout
    tools = loadproof("serve", "embedded-tools", "--dry-run")
    assert tools.returncode == 0 and "--enable-auto-tool-choice --tool-call-parser hermes" in tools.stdout
    sim = loadproof("serve", "sim-small", "--dry-run")  # its model, `packaged:small`, is the packaged sim profile
    assert sim.returncode == 0 and f"--config {SMALL}" in sim.stdout and "-m loadproof sim" in sim.stdout


def test_a_name_of_nothing_is_one_line_listing_the_packaged_names():
    for args in (
        ["serve", "nope", "--dry-run"],
        ["plan", "nope"],
        ["run", "throughput", "--url", "http://127.0.0.1:9", "--profile", "nope"],
    ):
        result = loadproof(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.strip().splitlines() == [
            "error: profile not found: nope (not a file, and not a packaged profile: embedded, embedded-asr, "
            "embedded-fleet, embedded-pd, embedded-tools, embedded-vlm, llama-8b-h200, reference-2node, "
            "reference-sglang, reference-tp4pp2, sim-small; see loadproof profiles)"
        ], args
    sim = loadproof("sim", "--config", "nope")  # before anything listens
    assert sim.returncode == 2 and sim.stderr.startswith("error: --config: profile not found: nope (not a file")
    arm = loadproof(
        "run",
        "ab",
        "--url",
        "http://127.0.0.1:9",
        "--a",
        "temperature=0",
        "--b",
        "temperature=1",
        "--a-profile",
        "nope",
    )
    assert arm.returncode == 2 and "--a-profile nope: profile not found: nope (not a file" in arm.stderr, arm.stderr


def test_run_takes_a_packaged_profile_by_name():
    # the profile resolves (no exit 2 naming it); the run then stops where nothing serves
    result = loadproof(
        "run", "throughput", "--url", "http://127.0.0.1:9", "--profile", "embedded", "--out", "/nonexistent-runs"
    )
    assert result.returncode == 3 and "cannot reach http://127.0.0.1:9" in result.stderr, result.stderr


def test_plan_takes_a_packaged_profile_by_name():
    by_name = loadproof("plan", "reference-tp4pp2", "-l", "100000")
    assert by_name.returncode == 0, by_name.stderr
    assert "4,793,472" in by_name.stdout and "reference-tp4pp2" in by_name.stdout
    assert by_name.stdout == loadproof("plan", str(PROFILES / "reference-tp4pp2.toml"), "-l", "100000").stdout
    bare = loadproof("plan", "sim-small")
    assert bare.returncode == 2 and "sim-small serves the simulator: give --simulate" in bare.stderr


def test_plan_predicts_on_the_packaged_simulator_profile_by_name(tmp_path):
    contract = tmp_path / "p.json"
    args = ["--simulate", "load", "--rate", "4", "-n", "40", "--input-tokens", "128", "--output-tokens", "16"]
    made = loadproof("plan", "sim-small", *args, "--prediction-out", str(contract))
    assert made.returncode == 0, made.stderr
    assert "model: packaged sim profile small" in made.stdout + made.stderr
    written = json.loads(contract.read_text())  # the contract rests on the sim profile file it ran
    assert written["sim_profile"] == {"name": "small.toml", "sha256": sha256(SMALL.read_bytes()).hexdigest()}
    named_sim = loadproof("plan", "sim-small", *args, "--sim", "sim-small")
    assert named_sim.returncode == 0, named_sim.stderr
    wrong = loadproof("plan", "embedded", *args, "--sim", "embedded")
    assert wrong.returncode == 2 and "--sim embedded: not a sim profile" in wrong.stderr
    predicted = loadproof("sim", "predict-load", "sim-small", "--rate", "2", "-n", "20")
    assert predicted.returncode == 0 and "model: packaged sim profile small" in predicted.stdout + predicted.stderr


def test_tune_takes_the_packaged_simulator_profile_by_name_as_profile_and_as_sim():
    values = {"slo": "ttft=300ms,tpot=50ms", "duration_s": 2, "rate": "8", "search_max": 16}
    request = tune_request("sim-small", "sim-small", ["max_num_seqs=1,4"], values)
    assert request.profile.name == "sim-small" and request.profile_path == PROFILES / "sim-small.toml"
    assert request.sim_path == SMALL and request.sim.model == "sim-small"
    assert sorted(spec(request).sha256) == ["sim-small.toml", "small.toml"]  # both files kept for a resume
    predicted = predict_point(request.profile, request.sim, request.load, "max_num_seqs=default")
    assert predicted.max_rate_rps and predicted.kv_gib == 0.0  # the simulator's own: no GPU memory to plan
