"""`loadproof track` on the command line: each tracker's one line, and every mistake one line with exit code 2,
found before the run is read and before anything is sent."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from loadproof.cli import main
from tests.unit.trackers.runs import tracked_run


def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["loadproof", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_otlp_and_llm_d_each_say_what_they_wrote(tmp_path: Path, monkeypatch, capsys):
    run = tracked_run(tmp_path / "runs")
    code, out, err = cli(
        monkeypatch, capsys, "track", str(run), "--otlp", str(tmp_path / "otel"), "--llm-d", str(tmp_path / "r.json")
    )
    assert code == 0, err
    first, second = out.splitlines()
    assert re.fullmatch(
        rf"{run.name}: 13 spans and \d+ metric points written to {tmp_path / 'otel'}", first
    )  # 12 + the run's
    assert second == f"{run.name}: llm-d benchmark report 0.2.1 written to {tmp_path / 'r.json'}"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "nothing to track to: give --mlflow URI, --otlp FOLDER|URL or --llm-d FILE"),
        (["--mlflow", " "], "--mlflow: give a tracking URI"),
        (["--otlp", "http://"], "--otlp http://: a URL without a host"),
        (["--llm-d", "{run}/manifest.json"], "the file exists; give a new path"),
        (["--llm-d", "{tmp}/no/such/r.json"], "no folder"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, capsys, args: list[str], said: str):
    run = tracked_run(tmp_path / "runs")
    args = [a.format(run=run, tmp=tmp_path) for a in args]
    code, out, err = cli(monkeypatch, capsys, "track", str(run), *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and said in err


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path: Path, monkeypatch, capsys):
    code, _, err = cli(monkeypatch, capsys, "track", str(tmp_path), "--llm-d", str(tmp_path / "r.json"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "neither a run directory" in err
    assert not (tmp_path / "r.json").exists()
