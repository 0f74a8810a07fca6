#!/usr/bin/env python3
"""Stores a published bundle's records compressed, in place: each `runs/<run>/NAME.jsonl` becomes
`NAME.jsonl.zst` (zstandard, one frame that declares its size, as `loadproof publish` writes them now),
and SHA256SUMS is rewritten over the files as stored.

usage: scripts/in-venv python scripts/compress-bundle.py BUNDLE... [--check]

Nothing is dropped: each compressed file is decompressed again and compared byte for byte with the
original before the original goes. A bundle is converted only when it verifies before (`loadproof verify`:
every file matches SHA256SUMS and every claim recomputes), and it must verify after, claim for claim the
same. Only the checksum list holds digests of files: bundle.json holds none, and the digests a prediction
contract names (`store.digest.measurement_digest`) are of the records' numbers, which compression keeps, so
nothing else needs rewriting. A bundle already compressed is left as it is. `--check` converts nothing and
exits 1 if a bundle still holds a plain `.jsonl` record file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loadproof.store.files import ZST, compressed, read_content
from loadproof.verify import verify
from loadproof.verify.checksums import write_sums
from loadproof.verify.layout import RUNS_DIR


def plain_records(bundle: Path) -> list[Path]:
    return sorted(p for p in (bundle / RUNS_DIR).glob("*/*.jsonl") if p.is_file() and not p.is_symlink())


def compress_bundle(bundle: Path) -> tuple[int, int]:
    """(bytes before, bytes after) of the record files converted; ValueError when the bundle does not verify."""
    plain = plain_records(bundle)
    if not plain:
        return 0, 0
    before = verify(bundle)
    if not before.ok:
        raise ValueError(f"{bundle} does not verify as it is; nothing converted: {before.summary()}")
    size_before = size_after = 0
    for path in plain:
        data = path.read_bytes()
        packed = path.with_name(path.name + ZST)
        packed.write_bytes(compressed(data))
        if read_content(packed) != data:
            packed.unlink()
            raise ValueError(f"{packed} does not decompress to {path.name}; {path.name} kept")
        path.unlink()
        size_before, size_after = size_before + len(data), size_after + packed.stat().st_size
    write_sums(bundle)
    after = verify(bundle)
    same = [(c.name, c.published, c.recomputed) for c in before.checks] == [
        (c.name, c.published, c.recomputed) for c in after.checks
    ]
    if not after.ok or not same:
        raise ValueError(f"{bundle} does not verify the same once compressed: {after.summary()}")
    return size_before, size_after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE")
    parser.add_argument("--check", action="store_true", help="exit 1 if a bundle still holds a plain record file")
    args = parser.parse_args(argv)
    if args.check:
        left = [p for bundle in args.bundles for p in plain_records(bundle)]
        for path in left:
            print(f"plain: {path}")
        return 1 if left else 0
    for bundle in args.bundles:
        try:
            before, after = compress_bundle(bundle)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{bundle}: {before:,} -> {after:,} bytes" if before else f"{bundle}: compressed already")
    return 0


if __name__ == "__main__":
    sys.exit(main())
