"""One grid point measured for real: its profile served under the supervisor (`loadproof serve`, a process
of its own, so every point starts from a fresh engine), the rate search of `loadproof run load --search
rate` against it, then the engine stopped, whatever happened. The logs and run directories stay in the
point's folder; the search's search.json gives the figures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadproof.errors import LoadproofError
from loadproof.protocol.urls import base_url, url_of
from loadproof.tune.grid import Point, profile_toml

STOP_TIMEOUT_S = 60.0


def measure_point(point: Point, folder: Path, options: Any, say: Callable[[str], None]) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    profile = folder / "profile.toml"
    profile.write_text(profile_toml(point.profile), encoding="utf-8")
    url = base_url("127.0.0.1", options.port)
    cmd = [sys.executable, "-m", "loadproof"]
    started = time.monotonic()
    with open(folder / "serve.log", "ab") as log:
        serve = subprocess.Popen(
            [*cmd, "serve", str(profile), "--port", str(options.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            _wait_ready(url, serve, point.profile.serving.ready_timeout_s + 600, folder / "serve.log")
            ready_s = time.monotonic() - started
            say(f"  engine ready after {ready_s:.0f} s; rate search (log: {folder / 'load.log'})")
            search = [
                *cmd,
                "run",
                "load",
                "--url",
                url,
                "--profile",
                str(profile),
                "--out",
                str(folder / "runs"),
                *(["--tokenizer", str(options.tokenizer)] if options.tokenizer else []),
                *options.run_load_args(),
            ]
            with open(folder / "load.log", "ab") as load_log:
                rc = subprocess.run(
                    search, stdout=load_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                ).returncode
        finally:
            _stop(serve)
    if rc not in (0, 1):  # 1: no rate met the SLO (the search's own verdict)
        raise LoadproofError(f"the rate search of {point.name} ended with exit code {rc}: see {folder / 'load.log'}")
    found = sorted((folder / "runs").glob("load-search-*/search.json"))
    if not found:
        raise LoadproofError(f"the rate search of {point.name} left no search.json: see {folder / 'load.log'}")
    summary = json.loads(found[-1].read_text(encoding="utf-8"))
    best = summary.get("max_rate_rps")
    at_best = next((t for t in summary.get("trials", []) if t.get("rate_rps") == best), {})
    return {
        "max_rate_rps": best,
        "min_failing_rate_rps": summary.get("min_failing_rate_rps"),
        "ttft_p99_s": at_best.get("ttft_p99_s"),
        "search": str(found[-1].parent.relative_to(folder)),
        "engine_ready_s": round(ready_s, 1),
        "seconds": round(time.monotonic() - started, 1),
        "tried": [[t.get("rate_rps"), t.get("passed")] for t in summary.get("trials", [])],
    }


def _wait_ready(url: str, serve: subprocess.Popen, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            raise LoadproofError(
                f"`loadproof serve` exited with code {serve.returncode} before the engine was ready: see {log}"
            )
        try:
            with urllib.request.urlopen(url_of(url, "/v1/models"), timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    raise LoadproofError(f"the engine was not ready after {timeout_s:.0f} s: see {log}")


def _stop(serve: subprocess.Popen) -> None:
    """SIGINT to serve (it stops its engine, as on Ctrl-C), then SIGKILL to its whole group if it lingers."""
    if serve.poll() is not None:
        return
    try:
        serve.send_signal(signal.SIGINT)
        serve.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()
    except ProcessLookupError:
        pass
