"""A fleet's run published and verified: every fleet claim (each replica's, the fleet's, the expectation under the
router's policy, a replica's outage) recomputed from the bundle alone, the replicas' hosts gone from it, and a
replica's tampered counter caught."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from loadproof.publish import publish
from loadproof.rundir import EngineSample
from loadproof.store.export import export_run
from loadproof.store.files import read_content
from loadproof.store.run_dir import RunWriter
from loadproof.verify import verify
from tests.unit.metrics import fleet_runs
from tests.unit.publish.synthetic import read_jsonl, reseal, write_jsonl

HOSTS = ("gpu-node-07.cluster.internal", "gpu-node-08.cluster.internal")


def write_run(root: Path, name: str, manifest: dict[str, Any], records: list[Any], rows: list[dict[str, Any]]) -> Path:
    fleet = manifest["target"]["fleet"]
    for replica, host in zip(fleet["replicas"], HOSTS):
        replica["url"] = f"http://{host}:8000/metrics"
    fleet["router_metrics"] = "http://router.cluster.internal:29000/metrics"
    with RunWriter(root / name) as writer:
        writer.write_manifest({"run_id": name, **manifest})
        for record in records:
            writer.append(record)
        for row in rows:
            writer.metric_sample(msgspec.convert(row, EngineSample))
    return root / name


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("fleet")
    replay = {
        "scenario": "replay",
        "plan": msgspec.to_builtins(fleet_runs.replay_plan()),
        "target": {"url": "http://router.cluster.internal:8000", "fleet": fleet_runs.fleet_info()},
    }
    records = [fleet_runs.record(i, "replay") for i in range(8)]
    outage = {
        "scenario": "load",
        "plan": msgspec.to_builtins(fleet_runs.test_load.plan(planned_requests=20)),
        "target": {"url": "http://router.cluster.internal:8000", "fleet": fleet_runs.fleet_info()},
    }
    return [
        write_run(root / "src", "replay-20261205-fleet", replay, records, fleet_runs.replay_rows()),
        write_run(root / "src", "load-20261205-outage", outage, fleet_runs.outage_records(), fleet_runs.outage_rows()),
    ]


@pytest.fixture(scope="module")
def bundle(sources: list[Path]) -> Path:
    out = sources[0].parent.parent / "bundle"
    publish(sources, out)
    return out


def test_a_fleet_bundle_verifies_every_fleet_claim(bundle: Path):
    result = verify(bundle)
    assert result.ok, result.lines()
    checked = {c.name for c in result.checks if c.ok}
    for name in (
        "fleet.replica-1.prefix_hit_pct",
        "fleet.replica-0.prefix_hit_pct.expected",
        "fleet.prefix_hit_pct.measured_minus_expected_pp",
        "fleet.balance.max_share_over_even",
        "fleet.replica-1.outage1.back_s",
        "fleet.replica-0.prefix_hit_pct.after_outage",
    ):
        assert name in checked, name


def test_no_replicas_host_survives_into_the_bundle(bundle: Path):
    text = "".join(read_content(p).decode("utf-8", "replace") for p in bundle.rglob("*") if p.is_file())
    for host in (*HOSTS, "router.cluster.internal"):
        assert host not in text
    manifest = json.loads((bundle / "runs" / "replay-20261205-fleet" / "manifest.json").read_text())
    fleet = manifest["target"]["fleet"]
    assert [r["num_blocks"] for r in fleet["replicas"]] == [1000, 1000] and fleet["policy"] == "round_robin"
    assert all(r["url"] != fleet_runs.W0 for r in fleet["replicas"])


def test_a_replicas_tampered_counter_is_caught(bundle: Path, tmp_path: Path):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    path = copy / "runs" / "replay-20261205-fleet" / "metrics.jsonl"
    rows = read_jsonl(path)
    last = [r for r in rows if r.get("source") == "replica-1"][-1]
    last["values"]["prefix_cache_hits_total"] += 64  # 80 -> 144 of 256 queried: 56.25 % instead of 31.25 %
    write_jsonl(path, rows)
    reseal(copy)
    result = verify(copy)
    assert not result.ok
    assert "fleet.replica-1.prefix_hit_pct" in {c.name for c in result.checks if not c.ok}


def test_the_export_keeps_every_row_with_whose_it_is(sources: list[Path], tmp_path: Path):
    export_run(sources[0], tmp_path / "export", "csv")
    with open(tmp_path / "export" / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    # replay_rows: two ticks of replica-0 (3 values + up), replica-1 (the same) and the router (4 values + up, then 5)
    assert Counter(r["source"] for r in rows) == {"replica-0": 8, "replica-1": 8, "router": 11}
    assert {r["metric"] for r in rows if r["source"] == "router"} >= {"router_processed_requests_replica-0", "up"}
