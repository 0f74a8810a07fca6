"""A route added as one adapter file gets load, report, publish and verify: the example route
(tests/unit/example_route: an invented "echo" API at /v1/echo, both sides of it) is served by the simulator
through its adapter's server side, and `run load --endpoint echo`, `report`, `publish` and `verify` work on its
run, none of them changed for it. Every command runs with the route registered (`python -m
tests.unit.example_route ...`), the simulator too; and plain `loadproof verify`, which knows no echo route,
verifies the bundle from its plan's record of the route."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.sim.text import tokenizer_path
from tests.integration.sim_process import SimProcess
from tests.unit.example_route import DOCS, NAME

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.unit.example_route"


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", MODULE, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_the_example_route_gets_load_report_publish_and_verify(tmp_path: Path):
    runs = tmp_path / "runs"
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 20.0}, module=MODULE) as sim:
        argv = ["run", "load", "--endpoint", NAME, "--url", sim.url, "--out", str(runs)]
        argv += ["--rate", "4", "--duration-s", "1.5", "--tokenizer", str(tokenizer_path())]
        done = loadproof(*argv)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = runs.glob("load-*")
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert records and all(r["endpoint"] == NAME and r["ok"] for r in records)
    # what the echo stream said, read by its own adapter: tokens per event, the prompt's from its end event
    assert all(r["output_tokens"] == r["num_chunks"] - 1 and r["prompt_tokens"] > 0 for r in records)
    claims = {c["name"]: c for c in json.loads((run / "claims.json").read_text())["claims"]}
    assert claims["load.requests"]["value"] == len(records) and claims["load.failed_requests"]["value"] == 0
    assert "`/v1/echo`" in DOCS.read_text(encoding="utf-8")

    done = loadproof("report", str(run))
    assert done.returncode == 0 and "load:" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert (run / "report.html").is_file()
    bundle = tmp_path / "bundle"
    done = loadproof("publish", str(run), "--out", str(bundle))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    done = loadproof("verify", str(bundle))
    assert done.returncode == 0 and "VERIFIED" in done.stdout, done.stdout[-3000:]
    # a stranger holds no adapter for the route: the bundle's plan keeps what its claims need of it
    plain = subprocess.run(
        [sys.executable, "-m", "loadproof", "verify", str(bundle)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert plain.returncode == 0 and "VERIFIED" in plain.stdout, plain.stdout[-3000:] + plain.stderr[-3000:]
