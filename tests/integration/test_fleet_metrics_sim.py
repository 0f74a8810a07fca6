"""Measuring a fleet against real processes: the simulator's fleet (`loadproof sim --replicas 2`) replayed with every
replica's and the router's metrics scraped, the expectation per replica beside their counters, and the bundle
verified; then a real vllm-router 0.1.17 in front of two simulators, found by its GET /workers alone, one of them
killed mid-run and started again on its port: no finished request lost, and the recovery in the claims and the
report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import pytest

from loadproof.engines.process import free_port
from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess, requests_served
from tests.integration.test_scenarios_sim import run_scenario
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(300)

SLICE = str(files("loadproof") / "data" / "traces" / "mooncake-conversation-300.jsonl")
ROUTER = shutil.which("vllm-router", path=str(Path(sys.executable).parent))


def test_a_simulated_fleet_replayed_with_each_replica_measured_and_expected(tmp_path: Path):
    ports = [free_port(), free_port()]
    metrics = free_port()
    args = ["--replicas", "2", "--router-policy", "round_robin", "--replica-ports", ",".join(map(str, ports))]
    replicas = [f"http://127.0.0.1:{p}/metrics" for p in ports]
    with SimProcess(
        tmp_path / "fleet.log", *args, "--router-metrics-port", str(metrics), config={"time_scale": 10.0}
    ) as sim:
        code, claims, run = run_scenario(
            sim,
            tmp_path,
            "replay",
            *("--trace", SLICE, "--format", "mooncake", "--block-tokens", "32", "--time-scale", "10"),
            *("--max-requests", "40", "--max-output-tokens", "4", "--max-concurrency", "4"),
            *("--engine-metrics", ",".join(replicas), "--router-metrics", f"http://127.0.0.1:{metrics}"),
        )
    assert code == 0, claims
    value = {name: c["value"] for name, c in claims.items()}
    assert value["fleet.replicas"] == 2 and value["replay.requests"] == 40
    # round robin from a fresh router: 20 each, counted alike by the router and by each engine
    for i in (0, 1):
        assert value[f"fleet.replica-{i}.router_requests"] == value[f"fleet.replica-{i}.requests"] == 20
        assert value[f"fleet.replica-{i}.requests.expected"] == 20
        assert f"fleet.replica-{i}.prefix_hit_pct.measured_minus_expected_pp" in value
    assert value["fleet.requests"] == 40 and value["fleet.balance.max_share_over_even"] == 1.0
    assert value["fleet.router.policy"] == "round_robin"
    assert value["fleet.expected.policy"].startswith("round_robin (the router's vllm_router_policy_decisions_total)")
    # the fleet's own row is the replicas' summed: the single-engine figures read the same hits the replicas count
    assert value["replay.prefix_hit_rate.engine_pct"] == pytest.approx(value["fleet.prefix_hit_pct"], abs=0.01)
    assert abs(value["crosscheck.prompt_tokens.diff_pct"]) < 0.01
    # split over two caches, the requests can hit no more than one cache of the same blocks would give them
    assert value["fleet.prefix_hit_pct.expected"] <= value["replay.prefix_hit_rate.unbounded_blocks_pct"] + 0.01
    report = (run / "report.md").read_text()
    assert "## Fleet: the replicas" in report and "| replica-1 | 20 | 20 |" in report
    publish_and_verify(run, tmp_path / "bundle")


@dataclass(frozen=True)
class At:
    """Where `run_scenario` sends a run: the router's URL."""

    url: str


def start_sim(port: int, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadproof", "sim", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_until(lambda: _answers(f"http://127.0.0.1:{port}/health"), 30, lambda: log.read_text()[-2000:])
    return proc


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@pytest.mark.skipif(ROUTER is None, reason="vllm-router is not installed (pip install 'loadproof[router]')")
def test_a_replica_lost_behind_vllm_router_and_started_again(tmp_path: Path):
    ports = [free_port(), free_port()]
    sims = [start_sim(p, tmp_path / f"sim-{i}.log") for i, p in enumerate(ports)]
    router_port, prometheus = free_port(), free_port()
    workers = [f"http://127.0.0.1:{p}" for p in ports]
    assert ROUTER is not None
    with open(tmp_path / "router.log", "wb") as out:
        router = subprocess.Popen(
            [
                *(ROUTER, "--host", "127.0.0.1", "--port", str(router_port), "--worker-urls", *workers),
                *("--policy", "round_robin", "--prometheus-host", "127.0.0.1", "--prometheus-port", str(prometheus)),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(lambda: _answers(f"http://127.0.0.1:{router_port}/workers"), 60, lambda: "router not up")
        killed: list[float] = []

        def lose_and_restart() -> None:
            wait_until(lambda: requests_served(workers[1]) >= 3, 120, lambda: "replica 1 served nothing")
            stop(sims[1])
            killed.append(time.monotonic())
            time.sleep(3)  # sleep: the outage itself, 3 s of a replica gone, not a wait for something
            sims[1] = start_sim(ports[1], tmp_path / "sim-1b.log")

        chaos = threading.Thread(target=lose_and_restart)
        chaos.start()
        code, claims, run = run_scenario(
            At(f"http://127.0.0.1:{router_port}"),  # type: ignore[arg-type]  # run_scenario reads the URL alone
            tmp_path,
            "load",
            # 24 s: room for the replica to come back on a loaded machine (at 12 s it came back after the run)
            *("--rate", "4", "--duration-s", "24", "--input-tokens", "200", "--output-tokens", "8"),
            *("--router-metrics", f"http://127.0.0.1:{prometheus}"),
        )
        chaos.join(timeout=60)
    finally:
        for proc in (router, *sims):
            stop(proc)
    assert killed, "the replica was never killed"
    value = {name: c["value"] for name, c in claims.items()}
    records = (run / "requests.jsonl").read_text().splitlines()
    assert len(records) == value["load.planned_requests"]  # every request sent is recorded, none lost
    assert value["fleet.replicas"] == 2
    manifest = (run / "manifest.json").read_text()
    assert '"discovered": true' in manifest
    # the replicas are numbered in the order the router's /workers lists them, not the order it was given them
    listed = [r["url"] for r in json.loads(manifest)["target"]["fleet"]["replicas"]]
    lost = next(i for i, url in enumerate(listed) if str(ports[1]) in url)
    kept = 1 - lost
    base = f"fleet.replica-{lost}.outage1"
    assert value[f"{base}.restarted"] is True
    assert 0 <= value[f"{base}.silent_from_s"] < value[f"{base}.back_s"]
    assert f"{base}.router_sent" in value and f"{base}.finished_requests" in value
    assert f"fleet.replica-{kept}.prefix_hit_pct.after_outage" in value
    report = (run / "report.md").read_text()
    assert "## Fleet: a replica lost" in report and f"replica-{lost}: its /metrics stopped answering" in report
    assert code in (0, 1), claims  # a run that measured something (a failed request is the router's to explain)
