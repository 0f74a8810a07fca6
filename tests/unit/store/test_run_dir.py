"""The run directory: appended as requests end, read back whole, a torn last line tolerated."""

import json

import pytest

from loadproof.client.record import RequestRecord
from loadproof.errors import RunDirError
from loadproof.store.run_dir import RunWriter, load_run


def record(i: int) -> RequestRecord:
    return RequestRecord(request_id=f"r{i}", endpoint="chat", ok=True, send_ns=i, first_token_ns=i + 5,
                         last_token_ns=i + 9, end_ns=i + 10, output_tokens=3, chunk_ns=[i + 5, i + 7, i + 9],
                         chunk_tokens=[1, 1, 1])


def test_records_are_on_disk_as_soon_as_they_are_appended(tmp_path):
    writer = RunWriter.create(tmp_path, "throughput")
    writer.write_manifest({"run_id": writer.run_id})
    writer.append(record(1))
    # not closed: an interrupted process leaves exactly this on disk
    lines = (writer.path / "requests.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["request_id"] == "r1"
    assert "chunk_ns" not in json.loads(lines[0])
    writer.close()


def test_round_trip_and_torn_line(tmp_path):
    with RunWriter.create(tmp_path, "throughput") as writer:
        writer.write_manifest({"run_id": writer.run_id, "scenario": "throughput"})
        writer.append(record(1))
        writer.append(record(2))
    with open(writer.path / "requests.jsonl", "a") as f:
        f.write('{"request_id": "r3", "endpo')  # killed mid-write
    run = load_run(writer.path)
    assert [r.request_id for r in run.records] == ["r1", "r2"]
    assert run.records[1].chunk_ns == [7, 9, 11]
    assert run.num_torn_lines == 1
    assert run.records[0].latency_ns - run.records[0].ttft_ns == sum(run.records[0].itl_ns())


def test_missing_or_foreign_directory_is_a_usage_error(tmp_path):
    with pytest.raises(RunDirError, match="no run directory"):
        load_run(tmp_path / "nope")
    with pytest.raises(RunDirError, match="no manifest.json"):
        load_run(tmp_path)
