"""`loadproof run ab --scenario NAME` is NAME's command with the arms' options, and `--repeats N` is on every
command without one of its own: options, help and mistakes, before anything is sent."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.cli.apps import scenario_of


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=60)


def test_scenario_of_reads_the_flag_in_both_spellings_and_stops_at_a_double_dash():
    assert scenario_of(["--url", "u", "--scenario", "load", "--rate", "2"]) == "load"
    assert scenario_of(["--scenario=sessions"]) == "sessions"
    assert scenario_of(["--a", "top_p=1", "--", "--scenario", "load"]) is None
    assert scenario_of(["--scenario"]) is None


def test_the_unit_command_takes_the_units_options_and_the_arms():
    result = CliRunner().invoke(app, ["run", "ab", "--scenario", "load", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("--rate", "--num-requests", "--a-url", "--b-profile", "--a-setting", "runs a side", "--scenario"):
        assert text in result.output, text
    assert "--family" not in result.output  # the small batch's options are not the unit's
    batch = CliRunner().invoke(app, ["run", "ab", "--help"], env={"COLUMNS": "200"}).output
    assert "--family" in batch and "--rate" not in batch and "--scenario" in batch


def test_a_unit_with_a_repeats_of_its_own_keeps_its_default_and_takes_the_arms():
    result = CliRunner().invoke(app, ["run", "ab", "--scenario", "throughput", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--families" in result.output
    assert "runs a side" in result.output and "N, repeats of every level" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "ab", "--scenario", "nosuch"], "--scenario nosuch: must be one of throughput, load"),
        (["run", "ab", "--scenario", "load", "--rate", "2", "-n", "4", "--repeats", "1"], "--repeats 1: must be >= 2"),
        (["run", "ab", "--scenario", "load", "--rate", "2", "-n", "4", "--b", "temp=1"], "unknown setting temp"),
        (
            ["run", "ab", "--scenario", "load", "-n", "4", "--sweep", "1,2"],
            "--sweep makes `run load` a series of runs of its own",
        ),
        (["run", "load", "--rate", "2", "-n", "4", "--repeats", "0"], "--repeats 0: must be >= 1"),
        (["run", "capacity", "--repeats", "2", "--search", "sessions"], "--search makes `run capacity` a series"),
    ],
)
def test_mistakes_are_one_line_before_anything_is_sent(args, message):
    result = loadproof(*args, "--url", "http://127.0.0.1:9")  # port 9 refuses: a request would say "cannot reach"
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "cannot reach" not in result.stderr
    assert len(result.stderr.splitlines()) == 1
