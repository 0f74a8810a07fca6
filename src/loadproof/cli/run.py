"""`loadproof run SCENARIO`: one command per registered scenario, generated from its option models.

A command's options are the scenario's `Options` fields, its `CommandOptions` fields and the target's
(`scenarios.lifecycle.TargetOptions`), each declared once on its model (`scenarios.options`): flag,
aliases, default, help, the values it takes, its help panel and validation. `--help` lists them by panel,
in `Panel`'s order, and ends with the scenario's examples. The command itself is the run lifecycle: every
option is checked before anything is sent, then the target is resolved, the scenario run, reported and
judged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Annotated, Any

import typer
from rich.markup import escape

from loadproof.cli.apps import run_app, unit_commands
from loadproof.cli.common import console
from loadproof.results.auto import storing
from loadproof.scenarios import scenarios
from loadproof.scenarios.base import Scenario
from loadproof.scenarios.lifecycle import LiveMetricsOptions, TargetOptions, run_arms_command, run_command
from loadproof.scenarios.options import CliOption, Panel, cli_options
from loadproof.scenarios.repeats import ArmOptions, is_unit, repeat_options

PANELS = list(Panel)  # --help's groups, in this order


def target_options(scenario: type[Scenario]) -> list[CliOption]:
    """The target's options as `scenario` takes them: `--tokenizer` required, optional (with what it is
    for) or not offered; and the live endpoint's (`--metrics-port`), which every run command has."""
    use = scenario.tokenizer
    options = []
    for option in cli_options(TargetOptions):
        if option.field == "tokenizer":
            if use is None:
                continue
            option = replace(option, required=use.required, help=f"{option.help}: {use.purpose}")
        options.append(option)
    return options + cli_options(LiveMetricsOptions)


def by_panel(options: list[CliOption]) -> list[CliOption]:
    """`options` in the order `--help` lists them: by panel (`Panel`'s order; none last), each panel's in
    the order its models declare them."""
    return sorted(options, key=lambda o: PANELS.index(o.panel) if o.panel is not None else len(PANELS))


def command_options(scenario: type[Scenario]) -> list[CliOption]:
    """Every option of `loadproof run NAME`, in the order `--help` lists them (`--repeats N` where the scenario
    has none of its own: `scenarios.repeats`)."""
    repeat = repeat_options(scenario)
    everything = target_options(scenario) + cli_options(scenario.Options) + cli_options(scenario.CommandOptions)
    return unique(scenario, everything + (cli_options(repeat) if repeat is not None else []))


def unit_options(host: type[Scenario], unit: type[Scenario]) -> list[CliOption]:
    """Every option of `loadproof run HOST --scenario UNIT`: the unit's own (less any the arms' options name: a
    `--repeats` of its own keeps its default), the arms' (HOST's command options, `scenarios.repeats.ArmOptions`)
    and the target's, in the order `--help` lists them."""
    arms = cli_options(host.CommandOptions) + cli_options(ArmOptions)
    taken = {flag for option in arms for flag in option.flags}
    own = target_options(unit) + cli_options(unit.Options) + cli_options(unit.CommandOptions)
    return unique(unit, [o for o in own if not taken & set(o.flags)] + arms)


def unique(scenario: type[Scenario], everything: list[CliOption]) -> list[CliOption]:
    names = [o.field for o in everything]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:  # a programming error, caught by the unit tests
        raise TypeError(f"scenario {scenario.name}: option names defined twice: {', '.join(duplicated)}")
    return by_panel(everything)


def parameter(option: CliOption, panel: str | None = None) -> inspect.Parameter:
    """The typer parameter of one option (keyword-only, named by its field), in its help panel (`panel`, where
    a command groups options its own way, else the option's). Its help is plain text: rich markup in it
    (`loadproof[ray]`) is escaped, so `--help` shows it as written."""
    help_text = option.help + {"list": " (comma-separated)", "pairs": " (KEY=VALUE, repeatable)"}.get(option.shape, "")
    decls = [f"{option.flag}/{option.off_flag}", *option.flags[1:]] if option.shape == "flag" else list(option.flags)
    kind: Any = {"flag": bool, "list": str, "pairs": list[str]}.get(option.shape, option.type)
    if not option.required and option.default is None and option.shape != "flag":
        kind = kind | None
    info = typer.Option(
        *decls,
        help=escape(help_text),
        rich_help_panel=panel or (option.panel.value if option.panel is not None else None),
        metavar=option.metavar,
        show_default=option.shape != "pairs",
    )
    default = inspect.Parameter.empty if option.required else option.default
    return inspect.Parameter(
        option.field, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[kind, info], default=default
    )


def build_command(scenario: type[Scenario]) -> Any:
    """The typer command of `scenario`: a function whose signature is its options."""

    def command(**values: Any) -> None:
        with storing(values["out"], console.say):  # LOADPROOF_STORE_AUTO=1: the runs made, added to the store
            run_command(scenario, values, console)

    command.__signature__ = inspect.Signature([parameter(o) for o in command_options(scenario)])  # type: ignore[attr-defined]  # a function declares no __signature__; inspect.signature (so typer) reads the one set here
    command.__name__ = f"run_{scenario.name}"
    command.__doc__ = escape(scenario.summary)
    return command


def unit_command(host: type[Scenario], unit: type[Scenario]) -> object:
    """`loadproof run HOST --scenario UNIT`: the unit's options and the arms', as one command."""

    def command(**values: Any) -> None:
        with storing(values["out"], console.say):  # as in build_command
            run_arms_command(unit, values, console)

    command.__signature__ = inspect.Signature([parameter(o) for o in unit_options(host, unit)])  # type: ignore[attr-defined]  # as in build_command
    command.__name__ = f"run_{host.name}_{unit.name}"
    command.__doc__ = escape(
        f"Two arms, each a target and sampling settings, each run `loadproof run {unit.name}` --repeats times, in "
        f"A B B A order: per key figure each arm's mean and 95% interval, B - A and its interval. {unit.summary}"
    )
    one = typer.Typer(add_completion=False)
    one.command(host.name)(command)
    return typer.main.get_command(one)


def units_of(host: type[Scenario]) -> dict[str, Callable[[], object]]:
    """The units a command that takes `--scenario` runs (none for any other): every other scenario whose options
    do not name the arms'."""
    if "scenario" not in host.CommandOptions.model_fields:
        return {}
    names = [n for n in scenarios.in_order() if n != host.name and is_unit(scenarios.get(n))]
    return {n: partial(unit_command, host, scenarios.get(n)) for n in names}


def examples(scenario: type[Scenario]) -> str | None:
    """The end of `--help`: each of the scenario's examples, what it does and then the command (indented)."""
    if not scenario.examples:
        return None
    lines = ["Examples:"]
    for example in scenario.examples:
        lines += ["", escape(example.what) + ":", f"  loadproof run {scenario.name} {escape(example.args)}"]
    return "\n".join(lines)


for _name in scenarios.in_order():
    _scenario = scenarios.get(_name)
    run_app.command(_name, epilog=examples(_scenario))(build_command(_scenario))
    if units_of(_scenario):
        unit_commands[_name] = units_of(_scenario)

__all__ = [
    "PANELS",
    "build_command",
    "by_panel",
    "command_options",
    "examples",
    "parameter",
    "target_options",
    "unit_command",
    "unit_options",
    "units_of",
]
