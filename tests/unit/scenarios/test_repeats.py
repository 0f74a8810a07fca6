"""`run SCENARIO --repeats N` and `run ab --scenario SCENARIO`, on a stand-in scenario whose runs are synthetic
throughput run directories (one c1 request at a decode rate the test picks): the A B B A order actually run,
each arm's own target and settings, the index, and the tables of report.md with their intervals."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from loadproof.config.base import StrictModel
from loadproof.errors import NothingMeasured, RunDirError, UsageError
from loadproof.metrics import compute_claims
from loadproof.report.between_runs import NOT_DISTINGUISHABLE, arms_table, figure_names, sides_of
from loadproof.rundir import Manifest
from loadproof.scenarios.ab import AbCommand
from loadproof.scenarios.base import NoCommandOptions, Scenario, Setup
from loadproof.scenarios.recording import Console
from loadproof.scenarios.repeats import (
    ArmOptions,
    RepeatOptions,
    arm_runs,
    is_repeats_folder,
    is_unit,
    repeat_options,
    repeat_runs,
    report_repeats,
)
from loadproof.scenarios.target import Target, TargetOptions
from loadproof.store.run_dir import load_run, new_run_id
from tests.unit.report.synthetic import stream, throughput_run, write_run

DECODE = "throughput.english.c1.decode_tokens_per_s"
T975_4 = 2.776445  # Student t 0.975 quantile, 4 degrees of freedom (tables)


class FakeConsole:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.tables: list[tuple[str, list[str], list[list[str]]]] = []

    def say(self, text: str) -> None:
        self.lines.append(text)

    result = say

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        self.tables.append((title, header, rows))


class FakeOptions(StrictModel):
    sweep: str | None = Field(default=None, description="a series of its own, when set")


class Stand(Scenario):
    """Each run: one synthetic throughput run directory, its decode rate the next of its arm's (by URL)."""

    name = "stand"
    Options = FakeOptions
    rates: dict[str, Iterator[float]] = {}
    seen: list[tuple[str, dict[str, Any]]] = []
    broken: set[int] = set()  # runs (0-based, in order) whose every request fails

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        target = setup.target
        index = len(cls.seen)
        cls.seen.append((target.url, dict(target.extra_body)))
        name = new_run_id("throughput")
        if index in cls.broken:
            write_run(setup.out, name, "throughput", [stream("x", send=0, first=0.1, rate=50, ok=False)])
            raise NothingMeasured("stand: every request failed")
        throughput_run(setup.out, name, [next(cls.rates[target.url])])


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    monkeypatch.setattr(
        "loadproof.scenarios.base.resolve_target",
        lambda options, profile, tokenize=False: Target(url=options.url, model=options.model or "m", endpoint="chat"),
    )
    Stand.seen, Stand.broken = [], set()
    return Setup(
        profile=None,
        options=FakeOptions(),
        command=NoCommandOptions(),
        out=tmp_path,
        target_options=TargetOptions(url="http://a:1"),
        manifest_extra=Manifest(),
    )


def index_of(tmp_path: Path, kind: str) -> tuple[Path, dict[str, Any]]:
    (folder,) = tmp_path.glob(f"stand-{kind}-*")
    return folder, json.loads((folder / "repeats.json").read_text())


def test_the_arms_run_interleaved_a_b_b_a_each_with_its_own_target_and_settings(setup, tmp_path):
    Stand.rates = {"http://a:1": iter([98.0, 100.0, 102.0]), "http://b:2": iter([118.0, 120.0, 122.0])}
    console = FakeConsole()
    command = AbCommand(b_url="http://b:2")
    done = arm_runs(Stand, setup, command, ArmOptions(a={"top_p": 0.5}, b={"top_p": 0.9}, runs=3), console)
    a, b = "http://a:1", "http://b:2"
    assert [url for url, _ in Stand.seen] == [a, b, b, a, a, b]
    assert [body["top_p"] for _, body in Stand.seen] == [0.5, 0.9, 0.9, 0.5, 0.5, 0.9]
    folder, index = index_of(tmp_path, "ab")
    assert index["kind"] == "ab" and index["order"] == ["a", "b", "b", "a", "a", "b"] and index["completed"]
    assert [r["arm"] for r in index["runs"]] == index["order"] and len(done) == 6
    assert all((folder / r["run_dir"] / "requests.jsonl").exists() for r in index["runs"])
    assert index["arms"]["b"]["settings"] == {"top_p": 0.9} and index["arms"]["b"]["target"]["url"] == "http://b:2"
    # the A arm ran 98, then 100, 102 (its 1st, 4th and 5th runs); B 118, 120, 122: B - A = +20, Welch nu = 4
    report = (folder / "report.md").read_text()
    half = T975_4 * math.sqrt(8 / 3)
    row = next(line for line in report.splitlines() if line.startswith(f"| `{DECODE}`"))
    assert "98.0, 100.0, 102.0" in row and "118.0, 120.0, 122.0" in row
    assert f"+20.0 [+{20 - half:.1f}, +{20 + half:.1f}]" in row and "B higher, better" in row
    title, header, rows = console.tables[-1]
    assert header == ["claim", "A mean [95%]", "B mean [95%]", "B - A [95%]", "change", "B vs A"]  # no each-run
    assert [r[0] for r in rows][0] == DECODE


def test_an_a_a_run_is_not_distinguishable_and_a_run_that_measured_nothing_is_left_out(setup, tmp_path):
    Stand.rates = {"http://a:1": iter([100.0, 101.0, 99.5, 100.5])}
    Stand.broken = {2}  # the third run (arm b's second) measures nothing
    console = FakeConsole()
    arm_runs(Stand, setup, AbCommand(), ArmOptions(runs=2), console)
    assert any("identical" in line for line in console.lines)
    folder, index = index_of(tmp_path, "ab")
    assert [r["measured"] for r in index["runs"]] == [True, True, False, True]
    assert "every request failed" in index["runs"][2]["note"]
    report = (folder / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith(f"| `{DECODE}`"))
    assert "| 101.0 |" in row and NOT_DISTINGUISHABLE not in row  # B kept one run: no interval
    assert "n/a (one run on a side)" in row


def test_repeats_run_one_after_another_and_give_the_spread(setup, tmp_path):
    Stand.rates = {"http://a:1": iter([10.0, 11.0, 12.0])}
    console = FakeConsole()
    repeat_runs(Stand, setup, 3, console)
    assert len(Stand.seen) == 3
    folder, index = index_of(tmp_path, "repeats")
    assert index["kind"] == "repeats" and index["order"] == [] and [r["index"] for r in index["runs"]] == [0, 1, 2]
    report = (folder / "report.md").read_text()
    row = next(line for line in report.splitlines() if line.startswith(f"| `{DECODE}`"))
    half = 4.302653 / math.sqrt(3)  # sd 1 over 3 runs, t(0.975, 2)
    assert f"10.0, 11.0, 12.0 | 11.0 [{11 - half:.1f}, {11 + half:.1f}] | 1.0 | 9.1%" in row


def test_a_series_that_measured_nothing_says_so(setup):
    Stand.rates = {"http://a:1": iter([])}
    Stand.broken = {0, 1}
    with pytest.raises(NothingMeasured, match="no run measured anything"):
        repeat_runs(Stand, setup, 2, FakeConsole())


def test_a_sweep_or_search_is_no_unit(setup):
    sweeping = Setup(**{**setup.__dict__, "options": FakeOptions(sweep="1,2")})
    with pytest.raises(UsageError, match="--sweep makes `run stand` a series of runs of its own"):
        repeat_runs(Stand, sweeping, 2, FakeConsole())


def test_which_commands_take_repeats_and_which_scenarios_are_units():
    from loadproof.scenarios import scenarios

    assert repeat_options(scenarios.get("load")) is RepeatOptions
    assert repeat_options(scenarios.get("throughput")) is None  # its --repeats: rounds inside one run
    assert is_unit(scenarios.get("sessions")) and not is_unit(scenarios.get("ab"))


def test_the_table_of_two_sides_from_run_directories(tmp_path):
    runs = [
        ("colocated", throughput_run(tmp_path, "r1", [50.0])),
        ("pd", throughput_run(tmp_path, "r2", [60.0])),
        ("pd", throughput_run(tmp_path, "r3", [61.0])),
        ("colocated", throughput_run(tmp_path, "r4", [51.0])),
    ]
    sides = sides_of([(label, load_run(path)) for label, path in runs], compute_claims)
    assert [s.label for s in sides] == ["colocated", "pd"] and sides[0].samples[DECODE] == pytest.approx([50, 51])
    header, rows = arms_table(sides[0], sides[1], figure_names(sides))
    assert header[5] == "pd - colocated [95%]"
    assert rows[0][0] == DECODE and rows[0][5].startswith("+10.0 [+") and rows[0][7] == "pd higher, better"


def test_the_folder_reports_again_from_its_runs_alone(setup, tmp_path):
    Stand.rates = {"http://a:1": iter([10.0, 12.0]), "http://b:2": iter([20.0, 21.0])}
    arm_runs(Stand, setup, AbCommand(b_url="http://b:2"), ArmOptions(runs=2), FakeConsole())
    folder, _ = index_of(tmp_path, "ab")
    assert is_repeats_folder(folder) and not is_repeats_folder(tmp_path)
    written = (folder / "report.md").read_text()
    (folder / "report.md").unlink()
    report_repeats(folder, FakeConsole())
    assert (folder / "report.md").read_text() == written and "| 20.0, 21.0 |" in written
    (folder / "repeats.json").write_text('{"schema": 9, "kind": "ab", "scenario": "stand", "runs_planned": 2}')
    with pytest.raises(RunDirError, match="schema 9, newer"):
        report_repeats(folder, FakeConsole())


def test_the_gpu_script_prints_the_same_table_for_runs_made_one_by_one(tmp_path):
    runs = [("x", [50.0]), ("y", [60.0]), ("y", [62.0]), ("x", [52.0])]
    args = [f"{arm}={throughput_run(tmp_path, f'r{i}', rates)}" for i, (arm, rates) in enumerate(runs)]
    script = Path(__file__).resolve().parents[3] / "scripts" / "gpu" / "abba_table.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    sides = sides_of([(arm, load_run(Path(a.partition("=")[2]))) for a, (arm, _) in zip(args, runs)], compute_claims)
    header, rows = arms_table(sides[0], sides[1], figure_names(sides))
    assert done.stdout.splitlines()[0] == "| " + " | ".join(header) + " |"
    assert f"| `{DECODE}` | 50.0, 52.0 | 60.0, 62.0 |" in done.stdout and rows[0][-1] in done.stdout
    one_arm = subprocess.run([sys.executable, str(script), args[0]], capture_output=True, text=True, timeout=60)
    assert one_arm.returncode == 2 and "two arms" in one_arm.stderr
