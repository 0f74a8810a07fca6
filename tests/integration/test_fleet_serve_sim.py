"""A fleet's launch side in seconds: `loadproof serve` of a profile with [replicas] whose engine is the simulator (two
`loadproof sim` replicas, real HTTP processes) behind the real vllm-router. Round robin reaches both replicas (the
router's own counters and each replica's agree), the router killed is restarted by its supervisor, a second router
(`loadproof router`) fronts the same replicas with another policy until Ctrl-C, the relay in front of the router
passes a request on to it, and SIGTERM leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from loadproof.engines.process import free_port
from tests.integration.conftest import metric_total, start_fleet, stop_fleet
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(180)

SIM_FLEET = """name = "sim-fleet"
engine = "sim"

[model]
path = "packaged:small"
served_name = "sim-small"
max_model_len = 4096

[serving]
endpoint = "chat"
port = {port}
ready_timeout_s = 60

[replicas]
count = 2
policy = "round_robin"
"""


def chat(url: str, text: str, headers: dict[str, str] | None = None) -> str:
    """One streaming chat request; the stream's bytes, read to the end."""
    body = {"model": "sim-small", "messages": [{"role": "user", "content": text}], "max_tokens": 4, "stream": True}
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200
        return resp.read().decode()


def serves(url: str) -> bool:
    try:
        return "[DONE]" in chat(url, "are you there")
    except OSError:  # not listening yet (URLError is an OSError)
        return False


def router_pid(events: Path) -> int:
    starts = [json.loads(r) for r in (events / "events-router.jsonl").read_text().splitlines() if '"start"' in r]
    return int(starts[-1]["pid"])


def test_a_sim_fleet_behind_vllm_router(tmp_path: Path):
    profile = tmp_path / "sim-fleet.toml"
    profile.write_text(SIM_FLEET.format(port=free_port()), encoding="utf-8")
    relay = free_port()
    args = [str(profile), "--probe-interval-s", "3600", "--backoff-s", "0.5", "--out", str(tmp_path)]
    handle = start_fleet([*args, "--relay", "--relay-port", str(relay)], tmp_path / "serve.stderr")
    sim = handle.fleet
    second = None
    try:
        assert sim.policy == "round_robin" and len(sim.replicas) == 2
        for i in range(6):
            assert "[DONE]" in chat(sim.url, f"question {i}")
        assert sim.routed() == [3.0, 3.0]  # the router's own count, per replica
        assert sim.served() == [3.0, 3.0]  # each replica's own: every request the router sent it, served
        said = handle.log.read_text()
        assert "[ready] replica 1: " in said and "[ready] replica 2: " in said and "[ready] router: " in said

        # the router dies: its supervisor starts it again, in front of the same replicas
        first = router_pid(sim.events)
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: router_pid(sim.events) != first, 30, "the router restarted", every_s=0.1)
        handle.groups.add(router_pid(sim.events))
        wait_until(lambda: serves(sim.url), 30, "the restarted router serves", every_s=0.1)
        rows = [json.loads(r)["kind"] for r in (sim.events / "events-router.jsonl").read_text().splitlines()]
        assert rows[:2] == ["start", "ready"] and rows[2:5] == ["exit", "restart", "start"]

        # a second router, alone, in front of the same replicas, with another policy
        port, metrics_port = free_port(), free_port()
        argv = [sys.executable, "-m", "loadproof", "router", "--worker-urls", ",".join(sim.replicas)]
        argv += ["--policy", "consistent_hash", "--port", str(port), "--prometheus-port", str(metrics_port)]
        with open(tmp_path / "router.stderr", "wb") as err:
            second = subprocess.Popen(
                [*argv, "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
            )
        assert second.stdout is not None
        line = second.stdout.readline()
        assert line.startswith(f"router: vllm-router (consistent_hash) at http://127.0.0.1:{port} in front of "), line
        before = sim.routed(f"http://127.0.0.1:{metrics_port}/metrics")
        for i in range(4):  # one session: consistent_hash keys on X-Session-ID, so one replica takes all four
            chat(f"http://127.0.0.1:{port}", f"turn {i}", {"X-Session-ID": "conversation-a"})
        after = sim.routed(f"http://127.0.0.1:{metrics_port}/metrics")
        assert sorted(a - b for a, b in zip(after, before)) == [0.0, 4.0]
        assert metric_total(f"http://127.0.0.1:{metrics_port}/metrics", "vllm_router_active_workers") == 2
        second.send_signal(signal.SIGINT)  # Ctrl-C
        assert second.wait(timeout=60) == 130
        assert "interrupted; stopped the router" in (tmp_path / "router.stderr").read_text()
        second.stdout.close()
        assert "[DONE]" in chat(sim.url, "the fleet's own router is untouched")
        before = sim.routed()
        assert "[DONE]" in chat(f"http://127.0.0.1:{relay}", "through the relay, then the router")
        assert sum(sim.routed()) == sum(before) + 1
    finally:
        if second is not None and second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
        stop_fleet(handle)
    assert "stopping the router and 2 replicas" in handle.log.read_text()
