"""`loadproof run quality --under-load-rate` on the real embedded engine, small: a few authored tasks asked
idle and then beside an open-loop load at a low constant rate. Both scorings stored, the load ran at about
its rate from the first under-load item to the last, and the changed-share claim agrees with the stored
answers. Whether any answer changed is measured, never asserted (it depends on the engine's kernels)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.bundles import publish_and_verify

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

RATE = 0.5
ITEMS = 3


def check_under_load_run(run_dir: Path, rate: float, items: int, rate_tolerance: float) -> dict:
    """What any under-load run must hold; returns its claims by name."""
    claims = {c["name"]: c for c in json.loads((run_dir / "claims.json").read_text())["claims"]}
    rows = [json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines()]
    idle = {(r["suite"], r["item_id"], r["mode"]): r for r in rows if not r.get("under_load")}
    loaded = {(r["suite"], r["item_id"], r["mode"]): r for r in rows if r.get("under_load")}
    assert len(idle) == len(loaded) == items and set(idle) == set(loaded)  # every item scored both ways
    assert all("answer_sha256" in r and "correct" in r for r in rows)
    pairs = [(idle[k], loaded[k]) for k in idle if "error" not in idle[k] and "error" not in loaded[k]]
    changed = [u for i, u in pairs if i["answer_sha256"] != u["answer_sha256"]]
    assert claims["quality.under_load.items"]["value"] == len(pairs)
    assert claims["quality.under_load.changed"]["value"] == len(changed)
    assert claims["quality.under_load.changed_share"]["printed"] == f"{len(changed) / len(pairs):.3f}"
    assert all({"answer_diff_at", "answer_text", "idle_answer_text"} <= set(u) for u in changed)
    report = (run_dir / "report.md").read_text()
    assert "## Quality under load" in report
    assert all(f"| {u['item_id']} |" in report for u in changed)  # each changed answer shown
    # the load: its own family, at about its rate, running from before the first under-load item to its last
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    load = [r for r in records if r["family"] == "load"]
    asked = [r for r in records if r["request_id"].endswith(".under-load")]
    assert load and len(asked) == items
    assert claims["load.requests"]["value"] == len(load)
    assert abs(claims["load.achieved_rate_rps"]["value"] / rate - 1) <= rate_tolerance
    sends = sorted(r["send_ns"] for r in load)
    assert sends[0] <= min(r["send_ns"] for r in asked)
    # constant arrivals, cut where the last item ends: the load sent up to the last item (within one gap of
    # its schedule, as the item may end before the next send is due) and nothing after the cut
    assert sends[-1] >= max(r["send_ns"] for r in asked) - 1.5e9 / rate
    assert sends[-1] <= max(r["end_ns"] for r in asked)
    assert all(r["output_text"] == "" for r in records)  # answers are compared in memory, never stored whole
    return claims


def test_quality_under_load_scores_each_item_idle_and_under_load(engine, tmp_path):
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
            "--suites",
            "authored",
            "--modes",
            "plain",
            "--authored-items",
            str(ITEMS),
            "--under-load-rate",
            str(RATE),
            "--under-load-arrival",
            "constant",
            "--under-load-input-tokens",
            "64",
            "--under-load-output-tokens",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=800,
    )
    elapsed_s = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    claims = check_under_load_run(run_dir, RATE, ITEMS, rate_tolerance=0.2)
    publish_and_verify(run_dir, tmp_path / "bundle")  # the claims recompute from the published run alone
    print(
        f"quality under load: {elapsed_s:.0f} s wall; {claims['quality.under_load.changed']['value']} of "
        f"{claims['quality.under_load.items']['value']} answers changed; load "
        f"{claims['load.achieved_rate_rps']['printed']} requests/s over {claims['load.requests']['value']} requests"
    )
