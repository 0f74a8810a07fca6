"""The checkpointed prefix-cache expectation and the adapters' wait for a slot through publish and verify: a bundle
of each verifies, its new claims among those checked, and a changed record moves them."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec

from loadproof.publish import publish
from loadproof.store.run_dir import Run, RunWriter
from loadproof.verify import verify
from tests.unit.metrics import test_adapter_wait, test_prefix_checkpoints
from tests.unit.publish.synthetic import read_jsonl, reseal, write_jsonl


def written(run: Run, folder: Path) -> Path:
    with RunWriter(folder) as writer:
        writer.write_manifest({**msgspec.to_builtins(run.manifest), "run_id": folder.name})
        for record in run.records:
            writer.append(record)
        for sample in run.samples:
            writer.metric_sample(sample)
    return folder


def published(run: Run, tmp_path: Path, name: str) -> Path:
    publish([written(run, tmp_path / "src" / name)], tmp_path / "bundle")
    return tmp_path / "bundle"


def checked(bundle: Path) -> dict[str, bool]:
    result = verify(bundle)
    assert not result.problems, result.lines()
    return {c.name: c.ok for c in result.checks}


def test_the_checkpointed_expectation_verifies_and_a_moved_turn_moves_it(tmp_path: Path):
    bundle = published(test_prefix_checkpoints.measured_run(), tmp_path, "sessions-20261205-175206-4c87")
    got = checked(bundle)
    assert got["sessions.turn0.checkpointed_hit_pct.bounded"] and got["sessions.checkpointed_hit_pct.unbounded"]
    assert all(got.values())
    # user 3's turn 1 sent before its turn 0: it finds no history of its own (the shared prefix only), and the
    # turn 0 after it finds the shared prefix and more
    requests = next((bundle / "runs").iterdir()) / "requests.jsonl"
    rows = read_jsonl(requests)
    first = next(r for r in rows if r["request_id"] == "sessions-u3-t0")
    later = next(r for r in rows if r["request_id"] == "sessions-u3-t1")
    first["send_ns"], later["send_ns"] = later["send_ns"], first["send_ns"]
    write_jsonl(requests, rows)
    reseal(bundle)
    got = checked(bundle)
    assert not got["sessions.turn1.checkpointed_hit_pct.bounded"] and not got["sessions.turn1.expected_hit_pct.bounded"]


def test_the_adapters_wait_verifies_and_a_later_first_token_moves_it(tmp_path: Path):
    bundle = published(test_adapter_wait.mix_run(), tmp_path, "load-20261205-180000-abcd")
    got = checked(bundle)
    assert got["load.model.c.ttft_over_base_s.p50"] and got["load.lora.engine_unlisted_adapter_s"]
    assert got["load.model.c.unstarted_s"] and got["load.engine_deferred_max"] and all(got.values())
    requests = next((bundle / "runs").iterdir()) / "requests.jsonl"
    rows = read_jsonl(requests)
    waited = next(r for r in rows if r["model"] == "c")
    waited["first_token_ns"] += 1_000_000_000  # 1 s later, still before its end
    write_jsonl(requests, rows)
    reseal(bundle)
    got = checked(bundle)
    assert not got["load.model.c.ttft_over_base_s.p50"] and not got["load.model.c.unstarted_s"]
    shutil.rmtree(tmp_path / "src")
