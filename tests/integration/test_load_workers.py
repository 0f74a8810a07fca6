"""`loadproof run load` spread over worker processes (`--workers N`) and over the nodes of a real two-node Ray
cluster started on this machine (`--ray-address`), through the CLI, against the simulator (a real process):
the schedule split, every record merged onto one clock with its worker id, a bundle that verifies, and an
interrupted run that keeps what was measured."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadproof.sim.text import tokenizer_path
from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(240)

LOAD = ["--input-tokens", "128", "--output-tokens", "8", "--seed", "11"]


def records_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]


def check_merged(run: Path, planned: int, workers: int) -> dict:
    """Every planned request recorded once, dealt round-robin, on one clock; returns the manifest's workers."""
    manifest = json.loads((run / "manifest.json").read_text())
    info = manifest["workers"]
    assert info["count"] == workers
    records = records_of(run)
    assert len(records) == planned and len({r["request_id"] for r in records}) == planned
    counts = collections.Counter(r["worker"] for r in records)
    assert sorted(counts) == list(range(workers)) and max(counts.values()) - min(counts.values()) <= 1
    # round-robin by schedule index: worker k sent the requests whose index is k mod N (the index ends the id)
    for r in records:
        assert int(r["request_id"].rsplit("-", 1)[-1]) % workers == r["worker"], r["request_id"]
    assert all(r["send_ns"] >= r["dispatch_ns"] >= r["intended_send_ns"] for r in records)
    # one clock: the merged intended send times are the schedule's offsets from one start, whoever sent them
    start = info["start_ns"]
    assert all(r["intended_send_ns"] >= start for r in records)
    assert info["alignment_error_bound_ns"] is not None and 0 <= info["alignment_error_bound_ns"] < 1_000_000
    assert [r["end_ns"] for r in records] == sorted(r["end_ns"] for r in records)
    return info


def test_two_worker_processes_split_the_schedule_and_the_merged_bundle_verifies(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim, tmp_path, "load", "--rate", "10", "-n", "40", "--workers", "2", "--slo", "ttft=2s", *LOAD
        )
    assert code == 0, claims
    info = check_merged(run, 40, 2)
    assert info["how"] == "processes" and len({w["pid"] for w in info["per_worker"]}) == 2
    value = {name: c["value"] for name, c in claims.items()}
    assert value["load.requests"] == 40 and value["load.failed_requests"] == 0
    assert value["crosscheck.prompt_tokens.client"] == value["crosscheck.prompt_tokens.engine"] == 40 * 128
    publish_and_verify(run, tmp_path / "bundle")


def interrupt_after(argv: list[str], out: Path, records: int, timeout_s: float = 90) -> tuple[int, str]:
    """Start the CLI, send one SIGINT once `records` requests have ended (as the live spools show), wait."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ended() -> bool:
        spools = out.glob("load-*/workers/w*/records/requests.jsonl")
        if sum(len(p.read_text().splitlines()) for p in spools) >= records:
            return True
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        return False

    wait_until(ended, timeout_s, lambda: proc.communicate()[1][-2000:], every_s=0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=90)
    return proc.returncode, stderr


def check_interrupted(out: Path, at_least: int) -> None:
    (run,) = out.glob("load-*")
    manifest = json.loads((run / "manifest.json").read_text())
    schedule = manifest["schedule"]
    assert schedule["interrupted"] is True and schedule["dispatched"] < schedule["planned"]
    records = records_of(run)
    assert len(records) == schedule["recorded"] == schedule["dispatched"] == manifest["num_records"]
    assert sum(r["ok"] for r in records) >= at_least
    assert all(r["ok"] or r["error_kind"] == "cancelled" for r in records)
    assert all(w["interrupted"] for w in manifest["workers"]["per_worker"])
    assert not (run / "workers").exists()  # the spools were merged and removed


def test_an_interrupted_multi_process_run_keeps_every_request_each_worker_measured(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        argv = [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "load",
            "--url",
            sim.url,
            "--tokenizer",
            str(tokenizer_path()),
            "--out",
            str(tmp_path),
            "--rate",
            "6",
            "--duration-s",
            "40",
            "--workers",
            "2",
            *LOAD,
        ]
        code, stderr = interrupt_after(argv, tmp_path, 6)
    assert code == 130, stderr[-2000:]
    assert "schedule interrupted: sent" in stderr
    check_interrupted(tmp_path, 6)


# ----- Ray: a real cluster of two nodes on this machine, each its own raylet and worker pool -----


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    pytest.importorskip("ray", reason="the loadproof[ray] extra (in the test extras) is not installed")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes(timeout=120)
        yield cluster.address
    finally:
        cluster.shutdown()


def test_ray_tasks_on_two_nodes_split_the_schedule_through_the_cli(tmp_path: Path, ray_cluster: str):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        code, claims, run = run_scenario(
            sim, tmp_path, "load", "--rate", "10", "-n", "30", "--ray-address", ray_cluster, *LOAD
        )
    assert code == 0, claims
    info = check_merged(run, 30, 2)
    assert info["how"] == "ray" and info["ray_address"] == ray_cluster
    assert len({w["node"] for w in info["per_worker"]}) == 2  # one task on each node of the cluster
    assert claims["load.requests"]["value"] == 30 and claims["load.failed_requests"]["value"] == 0


def test_an_interrupted_ray_run_stops_its_tasks_and_keeps_what_they_measured(tmp_path: Path, ray_cluster: str):
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        argv = [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "load",
            "--url",
            sim.url,
            "--tokenizer",
            str(tokenizer_path()),
            "--out",
            str(tmp_path),
            "--rate",
            "6",
            "--duration-s",
            "40",
            "--ray-address",
            ray_cluster,
            *LOAD,
        ]
        code, stderr = interrupt_after(argv, tmp_path, 6)
    assert code == 130, stderr[-2000:]
    check_interrupted(tmp_path, 6)


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with SimProcess(tmp_path / "sim.log") as sim:
        argv = [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "load",
            "--url",
            sim.url,
            "--tokenizer",
            str(tokenizer_path()),
            "--out",
            str(tmp_path),
            "--rate",
            "5",
            "-n",
            "10",
            *args,
            *LOAD,
        ]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_more_ray_workers_than_the_cluster_has_cpus_is_one_clear_error(tmp_path: Path, ray_cluster: str):
    proc = run_cli(tmp_path, "--workers", "3", "--ray-address", ray_cluster)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: --workers 3: the Ray cluster at") and "Traceback" not in proc.stderr
    assert all(not p.read_text() for p in tmp_path.glob("load-*/requests.jsonl"))  # refused before anything was sent


def test_an_unreachable_ray_cluster_is_one_clear_error(tmp_path: Path):
    pytest.importorskip("ray", reason="the loadproof[ray] extra (in the test extras) is not installed")
    proc = run_cli(tmp_path, "--ray-address", "127.0.0.1:9")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")] == [
        "error: cannot reach the Ray cluster at 127.0.0.1:9: Connection refused"
    ]
