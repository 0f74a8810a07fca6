"""`loadproof tune`'s options are `run load`'s (one LoadOptions: the same flags, defaults and validation), plus
what is its own; its table says a lower bound as one; a tune written by an older loadproof reads and resumes."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
import typer

from loadproof.cli import app
from loadproof.config.profile import packaged_profile
from loadproof.errors import ConfigError, UsageError
from loadproof.rundir.tune import Measured, Predicted, TuneSpec, TuneStarted
from loadproof.scenarios.load.options import LoadOptions
from loadproof.store.series import read_tune_journal
from loadproof.tune.grid import points
from loadproof.tune.journal import differences
from loadproof.tune.options import TuneOptions, tune_request
from loadproof.tune.table import BOUND, PointResult, Tune, table_rows
from loadproof.tune.tuning import spec

TUNE = Path(__file__).resolve().parents[3] / "docs" / "runs" / "embedded-2026-12-02-tune"
SIM = "[cost]\nstep_overhead_s = 0.004\n"
OWN = {"--sim", "--grid", "--help"} | {f"--{f.replace('_', '-')}" for f in TuneOptions.model_fields} | {"-o"}


def params(name: str, sub: str | None = None) -> dict[str, click.Parameter]:
    group = typer.main.get_command(app)
    command = group.commands[name]  # type: ignore[attr-defined]  # a click Group
    if sub is not None:
        command = command.commands[sub]
    return {flag: p for p in command.params for flag in p.opts}


def test_tune_declares_nothing_run_load_does_not_and_takes_its_defaults():
    tune, load = params("tune"), params("run", "load")
    borrowed = {flag: p for flag, p in tune.items() if flag.startswith("-") and flag not in OWN}
    assert borrowed and set(borrowed) <= set(load), set(borrowed) - set(load)
    for flag, p in borrowed.items():  # as run load declares it
        assert (p.default, p.help) == (load[flag].default, load[flag].help), flag
    assert tune["--attainment"].default == LoadOptions.model_fields["attainment"].default == 0.99


def files(tmp_path: Path) -> tuple[Path, Path]:
    profile, sim = tmp_path / "p.toml", tmp_path / "sim.toml"
    profile.write_text(
        'name = "t"\nengine = "sim"\n[model]\npath = "sim.toml"\nserved_name = "tiny"\nmax_model_len = 4096\n'
        '[serving]\nendpoint = "completions"\n'
    )
    sim.write_text(SIM)
    return profile, sim


def test_a_tune_request_is_one_load_options_run_load_would_validate(tmp_path: Path):
    profile, sim = files(tmp_path)
    request = tune_request(profile, sim, ["max_num_seqs=2,4"], {"slo": "ttft=1s", "duration_s": 5, "port": 9001})
    assert request.load.search == "rate" and request.load.attainment == 0.99 and request.load.search_maximum == 1024
    assert request.target.url == "http://127.0.0.1:9001" and request.options.grid == ["max_num_seqs=2,4"]
    with pytest.raises(ConfigError, match="bound each run with --num-requests N or --duration-s D"):
        tune_request(profile, sim, ["max_num_seqs=2"], {"slo": "ttft=1s"})  # run load's own rule
    with pytest.raises(ConfigError, match="give --slo"):
        tune_request(profile, sim, ["max_num_seqs=2"], {"duration_s": 5})
    with pytest.raises(UsageError, match="give at least one --grid"):
        tune_request(profile, sim, [], {"slo": "ttft=1s", "duration_s": 5})


def test_the_published_tune_resumes_with_the_options_it_was_run_with(tmp_path: Path):
    started = read_tune_journal(TUNE / "tune.jsonl")[0]
    assert isinstance(started, TuneStarted)
    profile, sim = files(tmp_path)
    values = {
        "slo": "ttft=1s,tpot=100ms",
        "attainment": 0.9,
        "rate": "1",
        "search_max": 64,
        "duration_s": 15,
        "input_tokens": "128",
        "output_tokens": "32",
    }
    same = spec(tune_request(profile, sim, ["max_num_seqs=2,4,6,8,12,16"], values))
    assert differences(started.tune, same) == ["profile", "sha256", "sim"]  # the files here are others
    today = spec(tune_request(profile, sim, ["max_num_seqs=2,4,6,8,12,16"], {**values, "attainment": None}))
    assert differences(started.tune, today)[-1] == "load.attainment"  # run load's default is 0.99, not 0.9


def test_a_rate_that_is_a_lower_bound_is_said_as_one_never_compared_as_the_maximum():
    (point,) = points(packaged_profile("embedded"), [])
    predicted = Predicted(point=point.name, max_rate_rps=8.0, min_failing_rate_rps=9.0, kv_gib=4.0)
    measured = Measured(
        point=point.name, max_rate_rps=64.0, lower_bound=True, search="runs/s", engine_ready_s=1.0, seconds=60.0
    )
    bounded = PointResult(point, predicted, measured)
    assert bounded.error_pct is None
    (row,) = table_rows(Tune([bounded], Path("."), False))
    assert row[1] == "8" and row[4] == "at least 64" and row[6] == "" and f"measured: {BOUND}" in row[7]
    found = Measured(
        point=point.name, max_rate_rps=10.0, min_failing_rate_rps=11.0, search="s", engine_ready_s=1.0, seconds=9.0
    )
    result = PointResult(point, predicted, found)
    assert result.error_pct == pytest.approx(-20.0) and "lower bound" not in result.status


def test_a_spec_is_what_the_journal_keeps(tmp_path: Path):
    profile, sim = files(tmp_path)
    kept = spec(tune_request(profile, sim, ["max_num_seqs=2"], {"slo": "ttft=1s", "duration_s": 5}))
    assert isinstance(kept, TuneSpec) and kept.load["attainment"] == 0.99 and kept.load["search"] == "rate"
