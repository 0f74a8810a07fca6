"""A scenario run several times as one command, so that what moves between runs is measured, not assumed:

- `loadproof run SCENARIO --repeats N`: N runs, one after another, each the scenario's own full run (its idle
  guard, its report) of the same options, and the across-run spread of its key figures (each run's value, the
  mean and its Student t 95% interval, the standard deviation);
- `loadproof run ab --scenario SCENARIO [its options] --a-url/--b-url/--a-profile/... --a K=V --b K=V
  --repeats N`: two arms, each a target and sampling settings as `run ab` defines them, N runs a side in
  A B B A A B ... order (`metrics.between_runs.abba_order`), and per key figure each arm's mean and interval,
  B - A with Welch's 95% interval, and "not distinguishable" where that holds 0.

Every run is an ordinary run directory inside the command's folder (`runs/SCENARIO-repeats-...`,
`runs/SCENARIO-ab-...`), which also holds `repeats.json` (`rundir.repeats.Repeats`, rewritten after each run,
so an interrupted series keeps what finished) and report.md (the tables, `report.between_runs`). A run that
measured nothing, or failed its verdict, stays in the folder and the index; one that measured nothing is left
out of the tables. A command that is itself a series of runs (a sweep, a search: `Scenario.series_options`)
is not a unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec
from pydantic import Field

from loadproof.config.base import StrictModel
from loadproof.config.profile import resolve_profile
from loadproof.errors import AcceptanceFailed, NothingMeasured, RunDirError, UsageError
from loadproof.metrics import compute_claims
from loadproof.metrics.between_runs import abba_order
from loadproof.metrics.claims import Claim
from loadproof.metrics.headline import render_lines
from loadproof.plans.ab import ARMS
from loadproof.report.between_runs import (
    arms_table,
    console_columns,
    figure_names,
    markdown_table,
    sides_of,
    spread_table,
)
from loadproof.report.build import REPORT
from loadproof.report.compare import Side
from loadproof.report.failures import failures_of
from loadproof.report.headline import console_headline
from loadproof.rundir.repeats import REPEATS_JSON, RepeatedRun, Repeats
from loadproof.scenarios.ab import AbCommand, Settings, settings_field
from loadproof.scenarios.base import Scenario, Setup
from loadproof.scenarios.options import Panel, cli, cli_options
from loadproof.scenarios.recording import Console, Nested, verdict_of
from loadproof.store.run_dir import Run, load_run, new_run_id
from loadproof.store.series import write_document

LABELS = {"a": "A", "b": "B"}  # the arms as the tables name them


class RepeatOptions(StrictModel):
    """`--repeats N` of a scenario whose command has no `--repeats` of its own."""

    runs: int = Field(
        default=1,
        ge=1,
        description="N, runs of the scenario one after another, each its own run directory in one folder, "
        "then each key figure's across-run mean, 95% interval and spread",
        json_schema_extra=cli("--repeats", panel=Panel.SLO_SEARCH),
    )


class ArmOptions(StrictModel):
    """`run ab --scenario`'s arms: each arm's sampling settings and the runs a side (the arms' targets are
    `AbCommand`'s)."""

    a: Settings = settings_field("a")
    b: Settings = settings_field("b")
    runs: int = Field(
        default=3,
        ge=2,
        description="N, runs a side, >= 2, in A B B A A B ... order: 2N runs in all",
        json_schema_extra=cli("--repeats", aliases=["-r"], panel=Panel.SLO_SEARCH),
    )


def flags_of(*models: type[StrictModel]) -> set[str]:
    return {flag for model in models for option in cli_options(model) for flag in option.flags}


def repeat_options(scenario: type[Scenario]) -> type[RepeatOptions] | None:
    """`RepeatOptions` where the scenario's command takes `--repeats N` as N runs; None where it has a
    `--repeats` of its own (repeats inside one run)."""
    own = flags_of(scenario.Options, scenario.CommandOptions)
    return None if own & flags_of(RepeatOptions) else RepeatOptions


def is_unit(scenario: type[Scenario]) -> bool:
    """Whether `run ab --scenario` takes the scenario as an arm's unit: its options do not name the arms'."""
    arms = set(AbCommand.model_fields) | {"a", "b"}
    return not arms & (set(scenario.Options.model_fields) | set(scenario.CommandOptions.model_fields))


def check_one_run(scenario: type[Scenario], setup: Setup) -> None:
    """A command that is a series of its own (a sweep, a search) is no unit: one line before any run."""
    for name in scenario.series_options:
        for model in (setup.options, setup.command):
            if getattr(model, name, None) is not None:
                raise UsageError(
                    f"--{name.replace('_', '-')} makes `run {scenario.name}` a series of runs of its own; "
                    "--repeats and `run ab --scenario` repeat one run"
                )


# --- one run of the series -------------------------------------------------------------------------------


@dataclass
class UnitRun:
    """A finished run of the series: its index line, and its run and claims where it left a directory."""

    line: RepeatedRun
    run: Run | None = None
    claims: list[Claim] = field(default_factory=list)


def run_unit(
    scenario: type[Scenario], setup: Setup, folder: Path, index: int, arm: str | None, console: Console
) -> UnitRun:
    """One full run of the scenario (its own `perform`: checks, run, report) into `folder`; its verdict or its
    measuring nothing does not stop the series."""
    before = {p.name for p in folder.iterdir()}
    note = None
    try:
        scenario.perform(replace(setup, out=folder), Nested(console))
    except (AcceptanceFailed, NothingMeasured) as exc:
        note = str(exc)
    made = sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in before)
    if not made:
        return UnitRun(RepeatedRun(index=index, arm=arm, measured=False, note=note or "no run directory"))
    run = load_run(made[-1])
    claims = compute_claims(run)
    measured = failures_of(run).headline() is None
    line = RepeatedRun(
        index=index, arm=arm, run_dir=made[-1].name, verdict=verdict_of(claims), measured=measured, note=note
    )
    return UnitRun(line, run, claims)


def _brief(scenario: str, unit: UnitRun) -> str:
    if unit.run is None:
        return unit.line.note or "no run"
    if not unit.line.measured:
        return failures_of(unit.run).headline() or "measured nothing"
    lines = render_lines(console_headline(scenario) or (), unit.claims)
    shown = "; ".join(f"{label} {text}".strip() for label, text in lines[:2])
    verdict = f"{unit.line.verdict}; " if unit.line.verdict else ""
    return f"{verdict}{shown or failures_of(unit.run).line()}"


def _series(
    scenario: type[Scenario],
    setups: dict[str | None, Setup],
    order: list[str | None],
    summary: Repeats,
    folder: Path,
    console: Console,
) -> list[UnitRun]:
    """Every planned run in `order` (an arm each, None for plain repeats), the index rewritten after each."""
    done: list[UnitRun] = []
    try:
        for index, arm in enumerate(order):
            side = f", arm {LABELS[arm]}" if arm is not None else ""
            console.say(f"run {index + 1} of {len(order)}{side}")
            unit = run_unit(scenario, setups[arm], folder, index, arm, console)
            done.append(unit)
            summary.runs.append(unit.line)
            write_document(folder / REPEATS_JSON, summary)
            console.say(f"  {unit.line.run_dir or '-'}: {_brief(scenario.name, unit)}")
        summary.completed = True
    except KeyboardInterrupt:
        summary.interrupted = True
        console.say(f"interrupted: {len(done)} of {len(order)} runs finished (kept in {folder})")
        raise
    finally:
        write_document(folder / REPEATS_JSON, summary)
        _report(summary, done, folder, console)
    return done


def _report(summary: Repeats, done: list[UnitRun], folder: Path, console: Console) -> None:
    """report.md: the runs, then the key figures' table and every figure's; the key table on the console."""
    measured = [u for u in done if u.run is not None and u.line.measured]
    claims = {id(u.run): u.claims for u in measured}

    def claims_of(run: Run) -> list[Claim]:
        return claims[id(run)]

    runs = [(LABELS.get(u.line.arm or "", "runs"), u.run) for u in measured if u.run is not None]
    what = "A/B, interleaved" if summary.kind == "ab" else "repeats"
    lines = [f"# loadproof {summary.scenario} {what}: {folder.name}", ""]
    lines += [f"- {line}" for line in _intro(summary)] + ["", "## Runs", ""]
    lines += markdown_table(
        ["run", "arm", "run directory", "verdict", "measured", "note"],
        [
            [
                str(u.line.index + 1),
                LABELS.get(u.line.arm or "", "-"),
                u.line.run_dir or "-",
                u.line.verdict or "-",
                "yes" if u.line.measured else "no",
                u.line.note or "",
            ]
            for u in done
        ],
        code=False,
    )
    sides = sides_of(runs, claims_of) if runs else []
    if len(sides) == (2 if summary.kind == "ab" else 1):
        header, rows = _table(sides, figure_names(sides))
        lines += ["", "## Key figures", "", *markdown_table(header, rows)]
        lines += ["", "## Every figure with a better direction", ""]
        lines += markdown_table(*_table(sides, figure_names(sides, every=True)))
        console.table(f"{summary.scenario}: {what}, across runs (95% intervals)", *console_columns(header, rows))
    (folder / REPORT).write_text("\n".join(lines) + "\n", encoding="utf-8")
    console.result(f"{what}: {len(done)} of {summary.runs_planned} runs; report: {folder / REPORT}")


def _table(sides: list[Side], names: list[str]) -> tuple[list[str], list[list[str]]]:
    """Two sides: the arms' table; one: the spread's."""
    return arms_table(sides[0], sides[1], names) if len(sides) == 2 else spread_table(sides[0], names)


def _intro(summary: Repeats) -> list[str]:
    out = [f"{len(summary.runs)} of {summary.runs_planned} runs" + ("" if summary.completed else " (interrupted)")]
    if summary.kind == "ab":
        out.append("order: " + " ".join(LABELS[a] for a in summary.order))
        for arm, spec in summary.arms.items():
            out.append(f"arm {LABELS[arm]}: {_arm_text(spec)}")
        out.append(
            "each arm's mean with its Student t 95% interval over its runs; B - A with Welch's 95% interval; "
            "not distinguishable: that interval contains 0"
        )
    else:
        out.append("each figure's mean over the runs with its Student t 95% interval; sd and cv across runs")
    out.append("a run that measured nothing is in the runs' table, not in the figures")
    return out


def _arm_text(spec: dict[str, Any]) -> str:
    """`URL, model M, route R, settings K=V ...` of an arm as `repeats.json` keeps it."""
    target = spec.get("target") or {}
    settings = spec.get("settings") or {}
    said = ", ".join(f"{k}={v}" for k, v in settings.items()) or "none"
    return f"{target.get('url')}, model {target.get('model')}, route {target.get('endpoint')}, settings {said}"


def _finish(done: list[UnitRun], what: str) -> None:
    if done and not any(u.line.measured for u in done):
        raise NothingMeasured(f"{what}: no run measured anything; the last: {done[-1].line.note or 'see its run'}")


def is_repeats_folder(folder: Path) -> bool:
    """A folder `--repeats` or `run ab --scenario` made (its `repeats.json`)."""
    return (folder / REPEATS_JSON).is_file()


def report_repeats(folder: Path, console: Console) -> list[UnitRun]:
    """report.md of a repeats or A/B folder again, from `repeats.json` and its run directories alone (each run's
    claims recomputed from its records): `loadproof report FOLDER`."""
    try:
        summary = msgspec.json.decode((folder / REPEATS_JSON).read_bytes(), type=Repeats)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise RunDirError(f"{folder / REPEATS_JSON}: {exc}") from None
    if summary.schema > Repeats.VERSION:
        raise RunDirError(f"{folder / REPEATS_JSON}: schema {summary.schema}, newer than this loadproof reads")
    done = []
    for line in summary.runs:
        path = folder / line.run_dir if line.run_dir else None
        if path is None or not path.is_dir():
            done.append(UnitRun(line))
            continue
        run = load_run(path)
        done.append(UnitRun(line, run, compute_claims(run)))
    _report(summary, done, folder, console)
    return done


# --- the commands ----------------------------------------------------------------------------------------


def repeat_runs(scenario: type[Scenario], setup: Setup, runs: int, console: Console) -> list[UnitRun]:
    """`run SCENARIO --repeats N`: N runs one after another, then the spread of their key figures."""
    check_one_run(scenario, setup)
    setup.target  # noqa: B018  # resolved once, before the first run (a bad URL: one line, no folder)
    folder = setup.out / new_run_id(f"{scenario.name}-repeats")
    folder.mkdir(parents=True)
    console.say(f"repeats directory: {folder}")
    summary = Repeats(
        kind="repeats", scenario=scenario.name, runs_planned=runs, options=setup.options.model_dump(mode="json")
    )
    done = _series(scenario, {None: setup}, [None] * runs, summary, folder, console)
    _finish(done, f"{scenario.name} repeats")
    return done


def arm_setup(scenario: type[Scenario], setup: Setup, command: AbCommand, settings: dict[str, Any], arm: str) -> Setup:
    """An arm's command: its own server, model, profile and route where given (else the command's), its
    sampling settings in every request body; resolved on its server now."""
    profile_ref = getattr(command, f"{arm}_profile")
    profile = resolve_profile(profile_ref) if profile_ref is not None else setup.profile
    overrides = {key: getattr(command, f"{arm}_{key}") for key in ("url", "model")}
    options = setup.target_options.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    extra = msgspec.structs.replace(setup.manifest_extra, profile=profile.model_dump() if profile else None)
    mine = replace(setup, profile=profile, target_options=options, resolved=None, manifest_extra=extra)
    target = mine.target
    endpoint = getattr(command, f"{arm}_endpoint") or target.endpoint
    if scenario.endpoints is not None and endpoint not in scenario.endpoints:
        raise UsageError(f"--{arm}-endpoint {endpoint}: `run {scenario.name}` measures {', '.join(scenario.endpoints)}")
    scenario.check_endpoint(setup.options, endpoint)
    mine.resolved = replace(target, endpoint=endpoint, extra_body={**target.extra_body, **settings})
    return mine


def arm_runs(
    scenario: type[Scenario], setup: Setup, command: AbCommand, arms: ArmOptions, console: Console
) -> list[UnitRun]:
    """`run ab --scenario SCENARIO`: both arms resolved first, then N runs a side in A B B A order, then the
    table of each key figure's arms and their difference."""
    check_one_run(scenario, setup)
    setups: dict[str | None, Setup] = {
        arm: arm_setup(scenario, setup, command, getattr(arms, arm), arm) for arm in ARMS
    }
    if setups["a"].target == setups["b"].target:
        console.say("note: the two arms are identical (an A/A run): B - A should be not distinguishable")
    order: list[str | None] = list(abba_order(arms.runs))
    folder = setup.out / new_run_id(f"{scenario.name}-ab")
    folder.mkdir(parents=True)
    console.say(f"A/B directory: {folder}")
    summary = Repeats(
        kind="ab",
        scenario=scenario.name,
        runs_planned=len(order),
        order=[str(a) for a in order],
        arms={arm: {"target": setups[arm].target.describe(), "settings": dict(getattr(arms, arm))} for arm in ARMS},
        options=setup.options.model_dump(mode="json"),
    )
    done = _series(scenario, setups, order, summary, folder, console)
    _finish(done, f"{scenario.name} A/B")
    return done


__all__ = [
    "ArmOptions",
    "RepeatOptions",
    "UnitRun",
    "arm_runs",
    "arm_setup",
    "check_one_run",
    "is_repeats_folder",
    "is_unit",
    "repeat_options",
    "repeat_runs",
    "report_repeats",
    "run_unit",
]
