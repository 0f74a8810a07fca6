"""A bundle's records are stored compressed (`NAME.jsonl.zst`): a compressed bundle verifies, a plain one (as
bundles were published before) still does, and a hostile `.zst` (a zstd bomb, a truncated file, garbage,
more than its header declares) is one clear RunDirError naming the file, or one FAILED line in verify: never
a crash, never the memory a bomb asks for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import zstandard

from loadproof.errors import RunDirError
from loadproof.publish import publish
from loadproof.store.files import MAX_DECOMPRESSED_BYTES, compressed, read_content
from loadproof.store.run_dir import ReadLimits, load_run, read_jsonl
from loadproof.verify import verify
from loadproof.verify.layout import MAX_FILE_BYTES
from tests import bundles
from tests.unit.publish.synthetic import reseal, throughput_run

SOURCE = bundles.DOCS_RUNS / "h200-2026-11-30" / "llama-prefill-100k"
ROWS = b"".join(b'{"request_id": "r%d", "endpoint": "completions"}\n' % i for i in range(2000))


def bomb(size: int) -> bytes:
    """`size` zero bytes as one honest zstd frame: a few KiB that decompress to `size`."""
    return zstandard.ZstdCompressor(level=1).compress(bytes(size))


def lying() -> bytes:
    """A frame that declares 100 bytes, then a second frame of 64 MiB the header says nothing of."""
    return compressed(b"x" * 99 + b"\n") + bomb(64 * 1024**2)


HOSTILE = {
    # what the file holds -> what the one error says
    "bomb": (lambda: bomb(MAX_DECOMPRESSED_BYTES + 1), "decompresses to 268,435,457 bytes, over the"),
    "lying": (lying, "decompresses to more than the 100 bytes its header declares"),
    "truncated": (lambda: compressed(ROWS)[:-40], "is truncated:"),
    "garbage": (lambda: b"not zstd at all\n" * 8, "is not a zstd file"),
    "garbage after the frame": (lambda: compressed(ROWS) + b"trailing", "does not decompress"),
    "empty": (lambda: b"", "is not a zstd file"),
    "no declared size": (
        lambda: zstandard.ZstdCompressor(write_content_size=False).compress(ROWS),
        "does not declare the content's size",
    ),
}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return bundles.plain_copy(SOURCE, tmp_path / "plain")


def compress_records(bundle: Path) -> Path:
    for path in sorted(bundle.glob("runs/*/*.jsonl")):
        path.with_name(path.name + ".zst").write_bytes(compressed(path.read_bytes()))
        path.unlink()
    reseal(bundle)
    return bundle


def test_a_plain_bundle_verifies_and_so_does_its_compressed_copy(bundle: Path):
    plain = verify(bundle)
    assert plain.ok, plain.lines()[:5]
    assert not list(bundle.rglob("*.zst"))
    records = sorted(p.name for p in bundle.glob("runs/*/*.jsonl"))
    assert {"requests.jsonl", "chunks.jsonl", "metrics.jsonl"} <= set(records)
    compress_records(bundle)
    assert sorted(p.name for p in bundle.glob("runs/*/*.zst")) == [f"{name}.zst" for name in records]
    packed = verify(bundle)
    assert packed.ok, packed.lines()[:5]
    assert [(c.name, c.published, c.recomputed) for c in packed.checks] == [
        (c.name, c.published, c.recomputed) for c in plain.checks
    ]


def test_the_repository_stores_its_bundles_records_compressed():
    # scripts/compress-bundle.py converts a bundle published before publish compressed its records
    for bundle in bundles.bundles():
        assert not list(bundle.glob("runs/*/*.jsonl")), f"{bundle}: plain records; scripts/compress-bundle.py"
        assert list(bundle.glob("runs/*/requests.jsonl.zst")), bundle


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_zst_is_one_run_dir_error_naming_the_file(tmp_path: Path, case: str):
    make, said = HOSTILE[case]
    path = tmp_path / "requests.jsonl.zst"
    path.write_bytes(make())
    started = time.monotonic()
    with pytest.raises(RunDirError) as refused:
        read_jsonl(tmp_path / "requests.jsonl")
    assert time.monotonic() - started < 5  # refused at the header, or within a read past the declared size
    message = str(refused.value)
    assert str(path) in message and said in message and "\n" not in message


def test_a_compressed_and_a_plain_copy_of_one_file_is_refused(tmp_path: Path):
    (tmp_path / "requests.jsonl").write_bytes(ROWS)
    (tmp_path / "requests.jsonl.zst").write_bytes(compressed(ROWS))
    with pytest.raises(RunDirError, match="holds both requests.jsonl and requests.jsonl.zst"):
        read_jsonl(tmp_path / "requests.jsonl")


def test_a_line_cap_holds_inside_a_compressed_file(tmp_path: Path):
    (tmp_path / "events.jsonl.zst").write_bytes(compressed(b'{"kind": "' + b"x" * 5000 + b'"}\n'))
    with pytest.raises(RunDirError, match="line 1 is longer than the 1,000-byte line cap"):
        read_jsonl(tmp_path / "events.jsonl", ReadLimits(max_document_bytes=1000))


@pytest.mark.parametrize("case", ["bomb", "truncated", "garbage", "lying"])
def test_verify_reports_a_hostile_zst_as_failed_lines_never_an_exception(bundle: Path, case: str):
    compress_records(bundle)
    (target,) = bundle.glob("runs/*/requests.jsonl.zst")
    target.write_bytes(HOSTILE[case][0]())
    reseal(bundle)  # the tamperer reseals: only reading the file can tell
    result = verify(bundle)
    assert not result.ok
    rel = target.relative_to(bundle).as_posix()
    assert any(rel in line or "requests.jsonl.zst" in line for line in result.lines() if "ok  " not in line)
    if case == "bomb":  # refused by its header at the scan, before a byte of it is decompressed
        assert ("TOO_LARGE", rel) in {(p.kind, p.path) for p in result.problems}
        assert any(f"over the {MAX_FILE_BYTES:,}-byte cap" in p.detail for p in result.problems)
    with pytest.raises(RunDirError, match="requests.jsonl.zst"):
        load_run(target.parent)


def test_publish_writes_records_that_decompress_to_what_it_sanitized(tmp_path: Path):
    publish([throughput_run(tmp_path / "src")], tmp_path / "bundle")
    (packed,) = (tmp_path / "bundle").glob("runs/*/requests.jsonl.zst")
    assert zstandard.frame_content_size(packed.read_bytes()[:18]) == len(read_content(packed))
    assert read_content(packed).count(b"\n") == len(load_run(packed.parent).records)
    assert verify(tmp_path / "bundle").ok
