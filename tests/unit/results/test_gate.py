"""`loadproof gate` on published load runs (their claims recomputed, so they carry intervals): a copy of a run as
its rerun passes with every change 0; against a stored baseline whose TTFT was half as long the run fails with
the evidence lines and the JSON result; a figure with no interval fails closed unless --missing pass; the store
query picks the newest other run; every mistake is one line with exit 2."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from loadproof.cli import main
from loadproof.results.gate_sides import query_of
from loadproof.results.store import open_store
from tests.unit.results.stored_runs import CAPACITY, LOAD, SEARCH, bundle_runs, recomputed

TTFT = "load.ttft_s.p50"


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["loadproof", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def renamed(run: Path, dest: Path, run_id: str) -> Path:
    """A copy of `run` as another run of the same records (a rerun that measured the very same)."""
    copy = dest / run_id
    shutil.copytree(run, copy)
    for name in ("manifest.json", "claims.json"):
        payload = json.loads((copy / name).read_text(encoding="utf-8"))
        payload["run_id"] = run_id
        (copy / name).write_text(json.dumps(payload), encoding="utf-8")
    return copy


def scaled_claim(run: Path, name: str, factor: float) -> None:
    """claims.json's `name` (value and interval) times `factor`: what the store will read of this run."""
    payload = json.loads((run / "claims.json").read_text(encoding="utf-8"))
    (claim,) = [c for c in payload["claims"] if c["name"] == name]
    claim["value"] *= factor
    claim["interval"]["low"] *= factor
    claim["interval"]["high"] *= factor
    (run / "claims.json").write_text(json.dumps(payload), encoding="utf-8")


@pytest.fixture(scope="module")
def load_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recomputed(bundle_runs(LOAD)[0], tmp_path_factory.mktemp("load"))


def test_a_rerun_of_the_same_records_passes_with_every_change_zero(load_run, tmp_path, monkeypatch, capsys):
    rerun = renamed(load_run, tmp_path, "load-rerun")
    out_json = tmp_path / "gate.json"
    code, out, err = cli(monkeypatch, capsys, "gate", str(rerun), "--baseline", str(load_run), "--json", str(out_json))
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith(f"gate: PASS: 4 figures within budget against {load_run.name}")
    for figure in ("ttft_p50", "itl_p50", "output_tokens_per_s", "success"):  # the defaults, a line each
        (line,) = [x for x in lines if x.startswith(f"  {figure} (")]
        assert ("change 0.0 pp [" if figure == "success" else "change 0.0% [") in line
        assert line.endswith("PASS (not distinguishable (its interval holds 0))")
    assert "budgets: ttft_p50=+10%, itl_p50=+10%, output_tokens_per_s=-10%, success=-1pp (the defaults)" in out
    result = json.loads(out_json.read_text())
    assert result["gate"] == "PASS" and result["exit_code"] == 0 and result["failures"] == []
    assert [f["decision"] for f in result["figures"]] == ["PASS"] * 4
    assert all(f["baseline"]["interval"]["confidence"] == 0.95 for f in result["figures"])


def test_a_run_slower_than_its_stored_baseline_fails_with_the_evidence(load_run, tmp_path, monkeypatch, capsys):
    baseline = renamed(load_run, tmp_path / "runs", "load-baseline")
    scaled_claim(baseline, TTFT, 0.5)  # the baseline's TTFT half the run's: the run is +100% [.., ..]
    db = tmp_path / "results.db"
    with open_store(str(db)) as store:
        store.add(baseline)
        store.add(load_run)  # the run itself, stored first as a CI job may: never its own baseline
    out_json = tmp_path / "gate.json"
    args = ["gate", str(load_run), "--baseline", "last", "--store", str(db), "--json", str(out_json)]
    code, out, err = cli(monkeypatch, capsys, *args, "--budget", "ttft_p50=+10%,itl_p50=+5%")
    assert code == 1, out + err
    first, *evidence = out.splitlines()
    assert re.match(
        r"gate: FAIL: ttft_p50 \+100\.0% \[\+\d+\.\d%, \+\d+\.\d%\] past its \+10% budget \(against load-baseline\)$",
        first,
    ), first
    (ttft,) = [x for x in evidence if x.startswith("  ttft_p50 (load.ttft_s.p50): baseline ")]
    assert ", run 0.04132 s [" in ttft and ttft.endswith("FAIL (its whole interval is past its +10% budget)")
    (itl,) = [x for x in evidence if x.startswith("  itl_p50 (load.itl_s.p50)")]
    assert itl.endswith("PASS (not distinguishable (its interval holds 0))")
    assert f"baseline: load-baseline (store {db}, run {baseline.resolve()}; --baseline last)" in out
    result = json.loads(out_json.read_text())
    assert result["gate"] == "FAIL" and result["exit_code"] == 1 and result["baseline"]["run_id"] == "load-baseline"
    (failed,) = [f for f in result["figures"] if f["fails_gate"]]
    assert failed["claim"] == TTFT and failed["change"] == pytest.approx(1.0)
    assert failed["change_interval"][0] > 0.10 and result["failures"] == [first.split("gate: FAIL: ")[1].split(" (")[0]]
    # the same baseline by its run id, and by a field of the store; its run directory gone (another CI job's),
    # the gate says it could not compare the workloads
    shutil.rmtree(baseline)
    for query in ("load-baseline", "profile=gemma3-270m-ngram-h200"):
        code, out, _ = cli(monkeypatch, capsys, "gate", str(load_run), "--baseline", query, "--store", str(db))
        assert code == 1 and out.startswith("gate: FAIL: ttft_p50 +100.0%"), out
        assert f"note: the workloads were not compared: the baseline's run directory ({baseline.resolve()}) is " in out


def test_a_figure_without_an_interval_fails_closed_unless_asked(load_run, tmp_path, monkeypatch, capsys):
    rerun = renamed(load_run, tmp_path, "load-rerun")
    # 300 requests: a p99's interval needs 368 values, so neither run has one
    code, out, _ = cli(
        monkeypatch, capsys, "gate", str(rerun), "--baseline", str(load_run), "--budget", "ttft_p99=+10%"
    )
    assert code == 1
    assert out.startswith("gate: FAIL: ttft_p99 not judged: no interval in either run"), out
    code, out, _ = cli(
        monkeypatch,
        capsys,
        *("gate", str(rerun), "--baseline", str(load_run), "--budget", "ttft_p99=+10%,ttft_p50=+10%"),
        *("--missing", "pass"),
    )
    assert code == 0 and out.startswith("gate: PASS: 2 figures within budget") and "not judged: ttft_p99" in out, out


def test_a_new_stores_first_run_passes_only_when_asked(load_run, tmp_path, monkeypatch, capsys):
    db = tmp_path / "results.db"
    args = ["gate", str(load_run), "--baseline", "last", "--store", str(db)]
    code, out, err = cli(monkeypatch, capsys, *args)
    assert code == 2 and "no stored run other than" in err and out == ""
    out_json = tmp_path / "gate.json"
    code, out, _ = cli(monkeypatch, capsys, *args, "--no-baseline", "pass", "--json", str(out_json))
    assert code == 0
    assert out.startswith(f"gate: PASS: no baseline to hold {load_run.name} against (--no-baseline pass): --baseline")
    result = json.loads(out_json.read_text())
    assert result["gate"] == "PASS" and result["baseline"] is None and "no stored run" in result["no_baseline"]
    # a run directory that is not there is never a first run
    code, _, err = cli(monkeypatch, capsys, "gate", str(load_run), "--baseline", "./gone", "--no-baseline", "pass")
    assert code == 2 and "no run directory there" in err


def test_queries_of_the_store():
    assert query_of("last", "load") == {"scenario": "load"}
    assert query_of("load-1234", "load") == {"run_id": "load-1234"}
    assert query_of("profile=a, model=b", "load") == {"scenario": "load", "profile": "a", "model": "b"}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--budget", "ttft_p50=-10%"], "--budget: budget ttft_p50=-10%: ttft_p50 gets worse as it rises"),
        (["--budget", "speed=+10%"], "--budget: unknown budget figure 'speed'"),
        (["--budget", "ttft_p50=fast"], "not a percentage"),
        (["--budget", "load.model.x.ttft_s.p50=+1%"], "budget load.model.x.ttft_s.p50: neither run has it"),
        (["--missing", "maybe"], "--missing is one of fail, pass"),
        (["--no-baseline", "maybe"], "--no-baseline is one of fail, pass"),
        (["--baseline", "nowhere/run"], "--baseline nowhere/run: no run directory there"),
        (["--baseline", "colour=red"], "--baseline colour=red: colour is not a stored field"),
        (["--baseline", "profile=nothing-like-it"], "no stored run other than load-"),
        (["--baseline", "@self"], "that is the run itself"),
        (["--baseline", "@capacity"], "is a capacity run"),
        (["--baseline", "@search"], "not gated, the workloads differ"),
    ],
)
def test_a_mistake_is_one_line_with_exit_2(args, says, load_run, tmp_path, monkeypatch, capsys):
    db = tmp_path / "results.db"
    places = {
        "@self": lambda: load_run,
        "@capacity": lambda: recomputed(bundle_runs(CAPACITY)[0], tmp_path),
        "@search": lambda: recomputed(bundle_runs(SEARCH)[0], tmp_path),
    }
    args = [str(places[a]()) if a in places else a for a in args]
    base = [] if "--baseline" in args else ["--baseline", str(renamed(load_run, tmp_path, "load-base"))]
    code, out, err = cli(monkeypatch, capsys, "gate", str(load_run), *base, *args, "--store", str(db))
    assert code == 2, out + err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert out == ""


def test_a_workload_that_differs_is_gated_when_asked(load_run, tmp_path, monkeypatch, capsys):
    other = recomputed(bundle_runs(SEARCH)[0], tmp_path)
    code, out, _ = cli(monkeypatch, capsys, "gate", str(load_run), "--baseline", str(other), "--anyway")
    assert code in (0, 1) and out.startswith("gate: ")
    assert "workloads differ, gated anyway: " in out
