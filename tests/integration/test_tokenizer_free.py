"""`loadproof run load` against the simulator (a real process) without `--tokenizer`: the prompts are sized
with the engine's own /tokenize, planned lengths are the lengths the engine counted, and the manifest says
which source the run used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.sim_process import SimProcess

pytestmark = pytest.mark.timeout(180)


def test_a_load_run_needs_no_tokenizer_where_the_engine_tokenizes(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        argv = [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "load",
            "--url",
            sim.url,
            "--rate",
            "5",
            "-n",
            "20",
            "--out",
            str(tmp_path),
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = tmp_path.glob("load-*")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["target"].get("tokenizer") is None and manifest["target"]["tokenizer_source"] == "engine"
    assert manifest["plan"]["overhead_source"] == "engine /tokenize"
    claims = {c["name"]: c["value"] for c in json.loads((run / "claims.json").read_text())["claims"]}
    assert claims["load.requests"] == 20 and claims["load.failed_requests"] == 0
    # every prompt is exactly its planned length as the engine counted it (1,024 tokens, the default)
    assert claims["load.input_tokens_mismatched"] == 0
    assert claims["crosscheck.prompt_tokens.client"] == claims["crosscheck.prompt_tokens.engine"] == 20 * 1024
