"""`loadproof sim --replicas N --router-policy P`: a simulated fleet behind a modelled router, as a real process:
each request routed to one replica by the policy, each replica's /metrics on its own port, the router's
per-replica counters on its metrics port in vllm-router's names, and bad fleet options refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from loadproof.engines.process import free_port
from tests.integration.sim_process import SimProcess, requests_served

pytestmark = pytest.mark.timeout(90)


def start(tmp_path: Path, policy: str, replicas: int = 2) -> tuple[SimProcess, list[str], str]:
    ports = [free_port() for _ in range(replicas)]
    metrics = free_port()
    args = ["--replicas", str(replicas), "--router-policy", policy, "--replica-ports", ",".join(map(str, ports))]
    sim = SimProcess(tmp_path / f"{policy}.log", *args, "--router-metrics-port", str(metrics), config={})
    return sim, [f"http://127.0.0.1:{p}" for p in ports], f"http://127.0.0.1:{metrics}"


def complete(url: str, prompt: str, session: str | None = None) -> dict[str, object]:
    body = json.dumps({"model": "sim", "prompt": prompt, "max_tokens": 2, "ignore_eos": True}).encode()
    headers = {"Content-Type": "application/json", **({"X-Session-ID": session} if session else {})}
    request = urllib.request.Request(url + "/v1/completions", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as resp:
        answer: dict[str, object] = json.loads(resp.read())
        return answer


def router_counters(metrics_url: str, name: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return {
        line.split('worker="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(name + "{") and 'worker="' in line
    }


def prefix_hits(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("vllm:prefix_cache_hits_total"))


def test_round_robin_alternates_and_each_replica_counts_its_own(tmp_path: Path) -> None:
    sim, replicas, metrics = start(tmp_path, "round_robin")
    with sim:
        for i in range(6):
            complete(sim.url, f"question number {i}: what is the capital of France?")
        assert [requests_served(url) for url in replicas] == [3.0, 3.0]
        assert router_counters(metrics, "vllm_router_processed_requests_total") == {url: 3.0 for url in replicas}
        decisions = router_counters(metrics, "vllm_router_policy_decisions_total")
        assert decisions == {url: 3.0 for url in replicas}
        with urllib.request.urlopen(metrics + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        assert 'policy="round_robin"' in text and "vllm_router_active_workers 2" in text
        assert 'vllm_router_requests_total{route="/v1/completions"} 6' in text


def test_consistent_hash_keeps_each_session_on_one_replica(tmp_path: Path) -> None:
    sim, replicas, metrics = start(tmp_path, "consistent_hash", replicas=3)
    with sim:
        for turn in range(3):
            for session in ("alice", "bob", "carol", "dave"):
                complete(sim.url, f"{session} asks turn {turn}", session=session)
        served = [requests_served(url) for url in replicas]
        assert sum(served) == 12 and all(n % 3 == 0 for n in served)  # each session's 3 turns on one replica
        assert sorted(router_counters(metrics, "vllm_router_processed_requests_total").values()) == sorted(served)


def test_cache_aware_keeps_a_shared_prefix_where_it_is_cached(tmp_path: Path) -> None:
    sim, replicas, _ = start(tmp_path, "cache_aware")
    with sim:
        system = "You are a careful assistant who answers in one word. " * 20
        for i in range(4):
            complete(sim.url, system + f"Question {i}?")
        served = [requests_served(url) for url in replicas]
        holder = served.index(4.0)
        assert served[1 - holder] == 0.0
        assert prefix_hits(replicas[holder]) > 0


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--replicas", "2", "--router-policy", "fastest"], "--router-policy: no model of policy 'fastest'"),
        (["--router-policy", "round_robin"], "give --replicas 2 or more"),
        (["--replicas", "2", "--replica-ports", "9001"], "--replica-ports gives 1 ports for 2 replicas"),
    ],
)
def test_bad_fleet_options_are_one_line(args: list[str], problem: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loadproof", "sim", "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert problem in done.stderr and "Traceback" not in done.stderr
