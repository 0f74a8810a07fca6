"""A prediction contract on the real embedded engine, failing for the right reason.

The contract is written by `loadproof plan --simulate capacity --prediction-out` from a sim profile that is
deliberately wrong: every step cost a hundred times too cheap. The run itself is healthy (its capacity
verdict passes); only the contract fails, on the figures the wrong costs move, with errors in the direction
they move them: the engine's first tokens come far later than promised, its window far slower. The bundle
then verifies: `verify` recomputes the judgement from the records and the manifest's contract.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.bundles import publish_and_verify

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

WRONG = """max_model_len = 32768
num_gpu_blocks = 30000
max_num_batched_tokens = 2048
[cost]
step_overhead_s = 0.0002
prefill_s_per_token = 1e-7
decode_s_per_seq = 0.0001
"""


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=500)


def test_a_contract_from_a_wrong_profile_fails_on_the_figures_it_got_wrong(engine, tmp_path):
    sim = tmp_path / "wrong.toml"
    sim.write_text(WRONG)
    contract = tmp_path / "contract.json"
    planned = loadproof(
        "plan",
        str(sim),
        "--simulate",
        "capacity",
        "--sessions",
        "2",
        "-l",
        "512",
        "--window-s",
        "3",
        "--prediction-out",
        str(contract),
    )
    assert planned.returncode == 0, planned.stderr[-2000:]
    promised = {f["claim"]: f for f in json.loads(contract.read_text())["figures"]}
    assert set(promised) == {
        "capacity.cold_ttft_median_s",
        "capacity.cold_ttft_max_s",
        "capacity.window_aggregate_tokens_per_s",
    }

    mismatch = loadproof(
        "run",
        "capacity",
        "--url",
        engine.url,
        "--tokenizer",
        str(engine.tokenizer),
        "-n",
        "3",
        "-l",
        "512",
        "--window-s",
        "3",
        "--prediction",
        str(contract),
        "--out",
        str(tmp_path / "runs"),
    )
    assert mismatch.returncode == 2 and "predicted for sessions = 2, this run has 3" in mismatch.stderr
    assert not (tmp_path / "runs").exists()  # refused before anything was sent

    ran = loadproof(
        "run",
        "capacity",
        "--url",
        engine.url,
        "--tokenizer",
        str(engine.tokenizer),
        "-n",
        "2",
        "-l",
        "512",
        "--window-s",
        "3",
        "--prediction",
        str(contract),
        "--out",
        str(tmp_path / "runs"),
    )
    assert ran.returncode == 1, ran.stderr[-3000:]
    assert "the prediction contract failed: capacity.cold_ttft_median_s" in ran.stderr
    [run] = (tmp_path / "runs").iterdir()
    claims = {c["name"]: c for c in json.loads((run / "claims.json").read_text())["claims"]}
    assert claims["capacity.verdict"]["value"] == "PASS"  # the run was healthy: only the promise broke
    assert claims["prediction.verdict"]["value"] == "FAIL"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["prediction"]["figures"] == json.loads(contract.read_text())["figures"]
    for name in ("capacity.cold_ttft_median_s", "capacity.cold_ttft_max_s"):
        measured = claims[name]["value"]
        assert measured > 3 * promised[name]["point"]  # the engine is slower than a 100x cheaper model says
        assert claims[f"prediction.{name}.error_pct"]["value"] > 200
        assert claims[f"prediction.criteria.{name.replace('.', '_')}"]["value"] == "FAIL"
    window = "capacity.window_aggregate_tokens_per_s"
    assert claims[f"prediction.{window}.error_pct"]["value"] < -50
    assert claims[f"prediction.{window}.in_range"]["value"] is False

    verified = publish_and_verify(run, tmp_path / "bundle")
    assert any("prediction.verdict" in p.read_text() for p in (tmp_path / "bundle").rglob("claims.json"))
    assert verified.returncode == 0
