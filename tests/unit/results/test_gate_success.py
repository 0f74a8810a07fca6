"""`loadproof gate` counts failed requests whatever the budgets name (#42): a published load run with a third of
its requests made failed, against the clean run stored as its baseline, FAILS on its success share with the
evidence (in percentage points, Wilson intervals of the counts); the same failed run again PASSES; a run whose
requests all failed fails first on having measured nothing, even against a baseline that measured nothing too.
Each run's claims recomputed from its records (tests/unit/results/stored_runs.py), no engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import zstandard

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import claims_payload
from loadproof.results.store import open_store
from loadproof.store.run_dir import load_run, write_claims
from tests.unit.results.stored_runs import LOAD, bundle_runs, recomputed
from tests.unit.results.test_gate import cli, renamed


def with_failures(run: Path, every: int) -> None:
    """Every `every`-th request of `run` made a failure (HTTP 500, no token), its claims.json recomputed."""
    path = run / "requests.jsonl.zst"
    rows = [json.loads(line) for line in zstandard.ZstdDecompressor().decompress(path.read_bytes()).splitlines()]
    for i, row in enumerate(rows):
        if i % every == 0:
            row.update(ok=False, error_kind="http_status", error_message="HTTP 500", http_status=500)
            row.update(first_token_ns=None, last_token_ns=None, first_answer_ns=None, output_tokens=0, num_chunks=0)
    path.unlink()
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    write_claims(run, claims_payload(load_run(run).run_id, compute_claims(load_run(run))))


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recomputed(bundle_runs(LOAD)[0], tmp_path_factory.mktemp("clean"))


def test_a_run_with_failures_fails_against_its_clean_stored_baseline(clean, tmp_path, monkeypatch, capsys):
    baseline = renamed(clean, tmp_path / "runs", "load-baseline")
    failing = renamed(clean, tmp_path / "runs", "load-failing")
    with_failures(failing, 3)  # 100 of the 300 requests
    db = tmp_path / "results.db"
    with open_store(str(db)) as store:
        store.add(baseline)
    out_json = tmp_path / "gate.json"
    # a budget on the TTFT only: the success share is held all the same
    args = ["gate", str(failing), "--baseline", "last", "--store", str(db), "--budget", "ttft_p50=+10%"]
    code, out, err = cli(monkeypatch, capsys, *args, "--json", str(out_json))
    assert code == 1, out + err
    first, *rest = out.splitlines()
    points = r"-\d+\.\d pp"
    assert re.match(
        rf"gate: FAIL: success -33\.3 pp \[{points}, {points}\] past its -1pp budget \(against load-baseline\)$", first
    ), first
    (line,) = [x for x in rest if x.startswith("  success (load.success_pct): ")]
    assert line.startswith("  success (load.success_pct): baseline 100% [")
    assert ", run 66.67% [" in line and line.endswith("budget -1pp: FAIL (its whole interval is past its -1pp budget)")
    assert "budgets: ttft_p50=+10%, success=-1pp (always)" in rest
    result = json.loads(out_json.read_text())
    (success,) = [f for f in result["figures"] if f["figure"] == "success"]
    assert success["fails_gate"] and success["change_unit"] == "pp" and success["budget_points"] == 1.0
    assert success["budget_fraction"] is None and success["change"] == pytest.approx(-100 / 3)
    assert success["change_interval"][1] < -1.0 and success["run"]["interval"]["method"] == "Wilson score"
    assert result["measured_nothing"] is None
    # the same failing run again: nothing moved, it passes (its failures are the baseline's too)
    again = renamed(failing, tmp_path / "again", "load-failing-again")
    code, out, _ = cli(monkeypatch, capsys, "gate", str(again), "--baseline", str(failing))
    assert code == 0 and out.startswith("gate: PASS: 4 figures within budget against load-failing"), out
    assert "change 0.0 pp [" in out


def test_a_run_that_measured_nothing_fails_first_whatever_its_baseline(clean, tmp_path, monkeypatch, capsys):
    nothing = renamed(clean, tmp_path, "load-nothing")
    with_failures(nothing, 1)  # every request failed
    baseline = renamed(nothing, tmp_path / "base", "load-nothing-before")  # measured nothing either
    out_json = tmp_path / "gate.json"
    args = ("gate", str(nothing), "--baseline", str(baseline), "--missing", "pass", "--json", str(out_json))
    code, out, _ = cli(monkeypatch, capsys, *args)
    assert code == 1
    assert out.startswith(
        "gate: FAIL: the run measured nothing: none of its 300 requests succeeded (against load-nothing-before)"
    ), out
    result = json.loads(out_json.read_text())
    assert result["gate"] == "FAIL" and result["exit_code"] == 1
    assert result["measured_nothing"] == "the run measured nothing: none of its 300 requests succeeded"
    assert result["failures"][0] == result["measured_nothing"]
    # against the clean run: the reason first, then the other failures
    code, out, _ = cli(monkeypatch, capsys, "gate", str(nothing), "--baseline", str(clean))
    assert code == 1 and out.startswith("gate: FAIL: the run measured nothing: none of its 300 requests succeeded; ")
