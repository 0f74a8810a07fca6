"""Speculative decoding on the real embedded engine: vLLM 0.32's CPU build drafting with its n-gram proposer
under the reference deployment's draft schedule by batch size (5 tokens for batches of 1-4 sequences, 3 for
5-32), rendered from a profile as `num_speculative_tokens_per_batch_size`.

The `edit` prompts ask for their own code back with one name changed, so n-gram lookup finds drafts. From the
engine's counters: at one stream every step drafts 5 tokens, at eight streams 3 (a few steps at the ramp-up and
tail, with fewer sequences running, still draft 5); the acceptance per level and by position; an A/B of
temperature 0 against 1 whose draft counters split by arm. The throughput bundle verifies offline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.bundles import publish_and_verify
from tests.integration.conftest import small_embedded, start_serve, stop_serve

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]

SPECULATIVE = """
[speculative]
method = "ngram"
draft_tokens = 5
draft_schedule = { "1-4" = 5, "5-32" = 3 }
"""


def run(kind: str, url: str, profile: Path, out: Path, *args: str) -> tuple[dict, Path]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadproof",
            "run",
            kind,
            "--url",
            url,
            "--profile",
            str(profile),
            "--out",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    runs = sorted(out.glob(f"{kind}-*"))
    assert proc.returncode == 0 and runs, proc.stderr[-3000:]
    claims = {c["name"]: c["value"] for c in json.loads((runs[-1] / "claims.json").read_text())["claims"]}
    return claims, runs[-1]


def test_the_draft_schedule_by_batch_size_is_what_the_engine_ran(tmp_path: Path):
    profile = small_embedded(tmp_path, SPECULATIVE)  # the embedded default (1 GiB of KV), eager, drafting
    handle = start_serve([str(profile)], tmp_path / "serve.stderr")
    try:
        url = handle.engine.url
        tp, tp_run = run(
            "throughput",
            url,
            profile,
            tmp_path / "tp",
            "--families",
            "edit",
            "--concurrency",
            "1,8",
            "--num-prompts",
            "1",
            "--max-tokens",
            "48",
        )
        ab, _ = run(
            "ab",
            url,
            profile,
            tmp_path / "ab",
            "--family",
            "edit",
            "--num-prompts",
            "1",
            "--max-tokens",
            "24",
            "--repeats",
            "2",
            "--a",
            "temperature=0",
            "--b",
            "temperature=1",
        )
    finally:
        stop_serve(handle)
    shown = {k: v for k, v in {**tp, **ab}.items() if "spec" in k or "aggregate" in k}
    print(json.dumps(shown, indent=1))  # the figures, with -s
    c1, c8 = "throughput.edit.c1.spec_decode", "throughput.edit.c8.spec_decode"
    # the schedule: 5 at one stream; at eight mostly 3 (the steps with 4 or fewer running draft 5)
    assert tp[f"{c1}.mean_draft_length"] > 4.5, tp
    assert 2.5 <= tp[f"{c8}.mean_draft_length"] < 4.0, tp
    assert tp[f"{c8}.pos4.acceptance_pct"] < tp[f"{c8}.pos0.acceptance_pct"]  # position 4: only the K5 steps
    # copying answers are drafted and accepted (Gemma 3 270M copied 100% at c1, 89% at c8 on 2026-12-02)
    assert tp[f"{c1}.acceptance_pct"] > 30 and tp[f"{c1}.mean_accepted_length"] > 1.5
    assert tp[f"{c1}.mean_accepted_length"] == pytest.approx(1 + tp[f"{c1}.accepted_tokens"] / tp[f"{c1}.drafts"])
    # the A/B's counters split by arm on the one engine: greedy copying is drafted (sampling at temperature 1 may
    # stray from the copy, and then n-gram lookup finds nothing to draft: no figure, never a zero)
    assert 0 < ab["ab.spec_acceptance_pct.a"] <= 100
    assert ("ab.spec_acceptance_pct.b" in ab) == ("ab.spec_acceptance_pct.change" in ab)
    assert "crosscheck.ttft_count.client" not in ab  # each arm's samples are its own: no one bracket for both
    verified = publish_and_verify(tp_run, tmp_path / "bundle")
    assert "VERIFIED" in verified.stdout
