"""A short, bounded soak on the real embedded engine: it stops by itself and reports its criteria."""

import json
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]


def test_short_soak_stops_by_itself_with_memory_and_drift(engine, tmp_path):
    # every 2nd request of a client is long: the test needs one client to get past its first request (short,
    # then long) in 12 s, and each client to send one (a busy machine once let one of two clients finish only
    # its first request in time: 3 requests, where this test asked for 4)
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "soak",
            "--url",
            engine.url,
            "--endpoint",
            "completions",
            "--duration-s",
            "12",
            "--clients",
            "2",
            "--long-every",
            "2",
            "--long-tokens",
            "1024",
            "--tokenizer",
            str(engine.tokenizer),
            "--max-latency-drift",
            "10",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 120  # the duration plus what was in flight, not forever
    (run_dir,) = tmp_path.iterdir()
    claims = {c["name"]: c for c in json.loads((run_dir / "claims.json").read_text())["claims"]}
    assert claims["soak.criteria.engine_memory"]["value"] == "PASS"
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert claims["soak.errors"]["value"] == 0 and claims["soak.requests"]["value"] == len(rows)
    assert {r["batch"] for r in rows} == {0, 1}  # both clients ran
    assert {r["family"] for r in rows} == {"short", "long"}  # a client went on past its first request
    assert all(r["prompt_tokens"] == 1024 for r in rows if r["family"] == "long")
    first_send = min(r["send_ns"] for r in rows)
    assert all((r["send_ns"] - first_send) / 1e9 < 12.5 for r in rows)  # nothing started after the duration
