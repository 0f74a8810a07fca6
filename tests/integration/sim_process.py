"""`loadproof sim` as a real process for integration tests, and small client helpers around it.

Shared by the fault, scenario, relay and supervisor tests that put the simulator in front of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from loadproof.client import RequestSpec
from loadproof.engines.process import free_port
from loadproof.protocol.routes import request_body
from loadproof.records import RequestRecord
from tests.polling import eventually, ready_while_running, wait_until

START_TIMEOUT_S = 30.0  # a cold Python start on a loaded 2-core machine


class SimProcess:
    """`loadproof sim` as a user starts it; ready once /health answers 200. `module`: the module run as
    `loadproof` (a fixture's, which registers a plug-in first: `tests.unit.example_route`)."""

    def __init__(self, log: Path, *args: str, config: dict[str, Any] | None = None, module: str = "loadproof") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        argv = [sys.executable, "-m", module, "sim", "--port", str(self.port), *args]
        if config is not None:
            path = log.with_suffix(".json")
            path.write_text(json.dumps(config), encoding="utf-8")
            argv += ["--config", str(path)]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        if not ready_while_running(self.healthy, self.proc, START_TIMEOUT_S, every_s=0.05):
            self.stop()
            pytest.fail(f"`loadproof sim {' '.join(args)}` did not come up:\n{log.read_text()[-3000:]}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return json.loads(resp.read())

    def set_faults(self, *active: str, **settings: Any) -> dict[str, Any]:
        """Replace the active faults (slowdown, after_tokens, after_requests as keywords)."""
        return self._call("/sim/faults", {"active": list(active), **settings})

    def state(self) -> dict[str, Any]:
        return self._call("/sim/state")

    def wait_idle(self, within_s: float) -> float:
        """Seconds until nothing runs or waits and every KV block is free; fails past `within_s`."""
        started = time.monotonic()

        def idle() -> bool:
            state = self.state()
            return not state["running"] and not state["waiting"] and state["num_free_blocks"] == state["num_gpu_blocks"]

        wait_until(idle, within_s, lambda: f"the simulator still holds the request: {self.state()}")
        return time.monotonic() - started

    def wait_exit(self, timeout_s: float = 10.0) -> int:
        return self.proc.wait(timeout=timeout_s)

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGKILL the whole process group (a hung simulator ignores nothing it is not sent)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


def requests_served(url: str) -> float:
    """The simulator's `vllm:request_success_total` at `url`, summed over its finish reasons (open /metrics)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("vllm:request_success_total"))


def spec(
    i: int = 0,
    *,
    prompt: str = "Tell me a story.",
    max_tokens: int = 16,
    ignore_eos: bool = False,
    endpoint: str = "completions",
    deadline_s: float | None = 30,
) -> RequestSpec:
    body = request_body(endpoint, "sim", prompt, max_tokens=max_tokens, ignore_eos=ignore_eos)
    return RequestSpec(request_id=f"r{i}", endpoint=endpoint, body=body, deadline_s=deadline_s)


async def until_tokens(record: RequestRecord, n: int, within_s: float = 10.0) -> None:
    """Wait until a live record has received `n` chunks with tokens."""
    await eventually(lambda: len(record.chunk_ns or ()) >= n, within_s, f"{n} chunks with tokens", every_s=0.01)
