#!/usr/bin/env python3
"""Regenerates src/loadproof/data/quality/gsm8k-200.jsonl, bit for bit, from GSM8K's test.jsonl.

usage: scripts/in-venv python scripts/make-gsm8k-subset.py SOURCE_TEST_JSONL [--out PATH] [--check]

SOURCE_TEST_JSONL is grade_school_math/data/test.jsonl of github.com/openai/grade-school-math (MIT,
1,319 lines). The 200 indices are `random.Random(20261130).sample(range(1319), 200)`, written in
ascending order; each line is `{"id": "gsm8k-test-NNNN", "index": N, "question": ..., "answer": ...}`
with question and answer exactly as in the source. `--check` compares instead of writing (exit 1 on a
difference).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

SEED = 20261130
NUM_ITEMS = 200
SOURCE_LINES = 1319
SOURCE_SHA256 = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "src" / "loadproof" / "data" / "quality" / "gsm8k-200.jsonl"


def select_indices(num_source: int = SOURCE_LINES) -> list[int]:
    return sorted(random.Random(SEED).sample(range(num_source), NUM_ITEMS))


def subset_text(source: bytes) -> str:
    rows = [json.loads(line) for line in source.decode("utf-8").splitlines() if line.strip()]
    lines = []
    for index in select_indices(len(rows)):
        row = {
            "id": f"gsm8k-test-{index:04d}",
            "index": index,
            "question": rows[index]["question"],
            "answer": rows[index]["answer"],
        }
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="GSM8K test.jsonl")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args()
    source = args.source.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    if digest != SOURCE_SHA256:
        print(
            f"warning: {args.source} has sha256 {digest}, not the {SOURCE_SHA256} the subset was made from",
            file=sys.stderr,
        )
    text = subset_text(source)
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'identical' if same else 'DIFFERENT'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({NUM_ITEMS} items, seed {SEED})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
