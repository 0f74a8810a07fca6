"""`loadproof run quality` on the real embedded engine, at the demo's slice: ids and scores stored, no question text.

The embedded model is a small base model: its GSM8K accuracy is near zero and is only reported, never
asserted; retrieval of a planted 7-digit code at about 1K tokens is something it does reliably.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from loadproof.workloads.quality import authored, gsm8k

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]


def test_quality_slice_scores_item_by_item(engine, tmp_path):
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            "quality",
            "--url",
            engine.url,
            "--endpoint",
            "completions",
            "--tokenizer",
            str(engine.tokenizer),
            "--out",
            str(tmp_path),
            "--gsm8k-items",
            "5",
            "--retrieval-lengths",
            "1024,2048",
            "--suites",
            "gsm8k,authored,retrieval,image",
        ],
        capture_output=True,
        text=True,
        timeout=500,
    )
    elapsed_s = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    (run_dir,) = tmp_path.iterdir()
    claims = {c["name"]: c for c in json.loads((run_dir / "claims.json").read_text())["claims"]}
    rows = [json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines()]
    tasks = authored.load_tasks()

    gsm = [r for r in rows if r["suite"] == "gsm8k"]
    assert [r["item_id"] for r in gsm] and all(re.fullmatch(r"gsm8k-test-\d{4}", r["item_id"]) for r in gsm)
    assert sorted(r["item_id"] for r in gsm) == [p.id for p in gsm8k.load_subset(5)]
    # every asked item is scored both ways; an extraction that found nothing is null, which answers.jsonl omits
    # (its rows keep only what is not a default), so a missing extraction is no missing field
    assert all({"expected", "correct_strict", "correct_flexible", "request_id"} <= set(r) for r in gsm)
    assert all(isinstance(r.get(k, ""), str) for r in gsm for k in ("extracted_strict", "extracted_flexible"))
    assert all(r["correct_strict"] is False for r in gsm if "extracted_strict" not in r)
    assert claims["quality.gsm8k.items"]["value"] == 5
    assert 0 <= claims["quality.gsm8k.correct"]["value"] <= 5  # measured, not judged
    assert claims["quality.authored.plain.items"]["value"] == len(tasks)
    assert claims["quality.authored.low-thinking.skipped"]["value"].startswith("completions endpoint")
    assert claims["quality.image.skipped"]["value"].startswith("completions endpoint")
    assert claims["quality.request_errors"]["value"] == 0
    # a planted fact at about 1K tokens: the small model finds it
    assert claims["quality.retrieval.1024.items"]["value"] == 2
    assert claims["quality.retrieval.1024.retrieved"]["value"] == 2
    assert claims["quality.retrieval.2048.items"]["value"] == 2

    # no question or prompt text anywhere in the run directory; no model text in the records
    stored = "".join(p.read_text(encoding="utf-8") for p in run_dir.iterdir() if p.is_file())
    questions = [p.question for p in gsm8k.load_subset(5)] + [t.prompt for t in tasks]
    assert not [q for q in questions if q in stored]
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 5 + len(tasks) + 4 and all(r["output_text"] == "" for r in records)
    assert "## Quality" in (run_dir / "report.md").read_text()
    print(
        f"quality slice: {elapsed_s:.0f} s wall; gsm8k {claims['quality.gsm8k.correct']['value']}/5 flexible, "
        f"{claims['quality.gsm8k.correct_strict']['value']}/5 strict; authored "
        f"{claims['quality.authored.plain.correct']['value']}/{len(tasks)}; retrieval 2048 "
        f"{claims['quality.retrieval.2048.retrieved']['value']}/2"
    )
