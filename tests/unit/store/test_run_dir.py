"""The run directory: appended as requests end, read back whole, a torn last line tolerated."""

import json
import os

import pytest

from loadproof.errors import RunDirError
from loadproof.records import RequestRecord
from loadproof.store.run_dir import ReadLimits, RunWriter, load_run


def record(i: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"r{i}",
        endpoint="chat",
        ok=True,
        send_ns=i,
        first_token_ns=i + 5,
        last_token_ns=i + 9,
        end_ns=i + 10,
        output_tokens=3,
        chunk_ns=[i + 5, i + 7, i + 9],
        chunk_tokens=[1, 1, 1],
    )


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


def written_run(tmp_path):
    with RunWriter.create(tmp_path, "throughput") as writer:
        writer.write_manifest({"run_id": writer.run_id, "scenario": "throughput"})
        writer.append(record(1))
        writer.append(record(2))
    return writer.path


@pytest.mark.parametrize(
    "tail",
    [
        '{"request_id": "r3", "family": "caf\u00e9'.encode()[:-1],  # cut inside the two bytes of é
        '{"request_id": "r3", "family": "\u6f22'.encode()[:-2],  # inside a three-byte character
        '{"request_id": "r3", "family": "\U0001f600'.encode()[:-3],  # inside a four-byte one
        b'{"request_id": "r3", "endpo',  # an ASCII tear, as before
        b"\x00" * 4096,  # blocks a power loss left unwritten
    ],
)
def test_a_torn_last_line_is_skipped_wherever_it_was_cut(tmp_path, tail):
    path = written_run(tmp_path)
    with open(path / "requests.jsonl", "ab") as handle:
        handle.write(tail)
    run = load_run(path)
    assert [r.request_id for r in run.records] == ["r1", "r2"]
    assert run.num_torn_lines == 1


def test_a_bad_line_before_the_last_is_an_error_naming_file_and_line(tmp_path):
    path = written_run(tmp_path)
    lines = (path / "requests.jsonl").read_bytes().splitlines(keepends=True)
    torn = '{"request_id": "r9", "family": "caf\u00e9'.encode()[:-1] + b"\n"
    (path / "requests.jsonl").write_bytes(lines[0] + torn + lines[1])
    with pytest.raises(RunDirError, match=r"requests\.jsonl: line 2: not UTF-8"):
        load_run(path)
    (path / "requests.jsonl").write_bytes(lines[0] + b'{"request_id": "r9", "endpo\n' + lines[1])
    with pytest.raises(RunDirError, match=r"requests\.jsonl: line 2: not valid JSON"):
        load_run(path)


@pytest.mark.parametrize(("row", "kind"), [("[1, 2]", "list"), ("5", "number"), ("null", "null"), ('"r1"', "string")])
def test_a_row_that_is_not_an_object_is_an_error_naming_file_and_line(tmp_path, row, kind):
    path = written_run(tmp_path)
    with open(path / "chunks.jsonl", "a") as handle:
        handle.write(row + "\n")
    with pytest.raises(RunDirError, match=rf"chunks\.jsonl: line 3 is not a JSON object \(a {kind}\)"):
        load_run(path)


def test_a_row_of_the_wrong_shape_is_an_error_not_a_crash(tmp_path):
    path = written_run(tmp_path)
    with open(path / "chunks.jsonl", "a") as handle:
        handle.write('{"t_ns": [1], "tokens": [1]}\n')  # no request_id
    with pytest.raises(RunDirError, match=r"chunks\.jsonl: row 3 is not a chunk row"):
        load_run(path)
    path = written_run(tmp_path / "b")
    with open(path / "requests.jsonl", "a") as handle:
        handle.write('{"request_id": "r3", "endpoint": "chat", "send_ns": "soon"}\n')
    with pytest.raises(RunDirError, match=r"requests\.jsonl: row 3 is not a request record"):
        load_run(path)


def test_the_manifest_must_be_a_json_object(tmp_path):
    path = written_run(tmp_path)
    (path / "manifest.json").write_text("[1, 2]\n")
    with pytest.raises(RunDirError, match="manifest.json is not a JSON object"):
        load_run(path)


def test_links_and_fifos_are_refused_not_followed(tmp_path):
    path = written_run(tmp_path)
    outside = tmp_path / "outside.jsonl"
    (path / "requests.jsonl").rename(outside)
    (path / "requests.jsonl").symlink_to(outside)
    with pytest.raises(RunDirError, match="requests.jsonl is a symbolic link"):
        load_run(path)
    (path / "requests.jsonl").unlink()
    os.mkfifo(path / "requests.jsonl")
    with pytest.raises(RunDirError, match="requests.jsonl is a FIFO"):
        load_run(path)  # opened non-blocking: a FIFO with no writer cannot hang the reader


def test_read_limits_cap_files_and_lines(tmp_path):
    path = written_run(tmp_path)
    size = max(p.stat().st_size for p in path.iterdir())
    with pytest.raises(RunDirError, match="over the 100-byte cap"):
        load_run(path, ReadLimits(max_file_bytes=100))
    manifest = (path / "manifest.json").stat().st_size
    with pytest.raises(RunDirError, match=rf"requests\.jsonl: line 1 is longer than the {manifest}-byte line cap"):
        load_run(path, ReadLimits(max_document_bytes=manifest))
    assert len(load_run(path, ReadLimits(max_file_bytes=size, max_document_bytes=size)).records) == 2


def test_manifest_writes_and_the_end_of_a_run_are_fsynced(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = RunWriter.create(tmp_path, "throughput")
    assert synced == [str(tmp_path)]  # the new run directory's entry
    synced.clear()
    writer.write_manifest({"run_id": writer.run_id})
    assert synced == [str(writer.path / "manifest.json.tmp"), str(writer.path)]  # the file, then the rename
    synced.clear()
    writer.append(record(1))
    writer.event("cancel", t_ns=5)
    assert synced == []  # per request: flushed, not synced (see run_dir's docstring for the cost)
    writer.close()
    assert sorted(synced) == sorted(
        [
            str(writer.path / "requests.jsonl"),
            str(writer.path / "chunks.jsonl"),
            str(writer.path / "events.jsonl"),
            str(writer.path),
        ]
    )
    assert not (writer.path / "manifest.json.tmp").exists()
