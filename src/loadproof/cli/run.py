"""`loadproof run SCENARIO`: one command per registered scenario, generated from its option models.

A command's options are the scenario's `Options` fields, its `CommandOptions` fields and the target's
(`scenarios.lifecycle.TargetOptions`), each declared once on its model (`scenarios.options`): flag,
aliases, default, help and validation. The command itself is the run lifecycle: every option is
checked before anything is sent, then the target is resolved, the scenario run, reported and judged.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Annotated, Any

import typer

from loadproof.cli.apps import run_app
from loadproof.cli.common import console
from loadproof.scenarios import scenarios
from loadproof.scenarios.base import Scenario
from loadproof.scenarios.lifecycle import TargetOptions, run_command
from loadproof.scenarios.options import CliOption, cli_options

SCENARIO_PANEL = "Scenario options"  # --help: the target's options (and --help) first, then the scenario's


def target_options(scenario: type[Scenario]) -> list[CliOption]:
    """The target's options as `scenario` takes them: `--tokenizer` required, optional (with what it is
    for) or not offered."""
    use = scenario.tokenizer
    options = []
    for option in cli_options(TargetOptions):
        if option.field == "tokenizer":
            if use is None:
                continue
            option = replace(option, required=use.required, help=f"{option.help}: {use.purpose}")
        options.append(option)
    return options


def command_options(scenario: type[Scenario]) -> list[tuple[CliOption, str | None]]:
    """Every option of `loadproof run NAME`, in the order `--help` lists them, with its help panel."""
    own = cli_options(scenario.Options) + cli_options(scenario.CommandOptions)
    everything: list[tuple[CliOption, str | None]] = [(o, None) for o in target_options(scenario)]
    everything += [(o, SCENARIO_PANEL) for o in own]
    names = [o.field for o, _ in everything]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:  # a programming error, caught by the unit tests
        raise TypeError(f"scenario {scenario.name}: option names defined twice: {', '.join(duplicated)}")
    return everything


def parameter(option: CliOption, panel: str | None = None) -> inspect.Parameter:
    """The typer parameter of one option (keyword-only, named by its field)."""
    help_text = option.help + {"list": " (comma-separated)", "pairs": " (KEY=VALUE, repeatable)"}.get(option.shape, "")
    decls = [f"{option.flag}/{option.off_flag}", *option.flags[1:]] if option.shape == "flag" else list(option.flags)
    kind: Any = {"flag": bool, "list": str, "pairs": list[str]}.get(option.shape, option.type)
    if not option.required and option.default is None and option.shape != "flag":
        kind = kind | None
    info = typer.Option(*decls, help=help_text, rich_help_panel=panel, show_default=option.shape != "pairs")
    default = inspect.Parameter.empty if option.required else option.default
    return inspect.Parameter(
        option.field, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[kind, info], default=default
    )


def build_command(scenario: type[Scenario]) -> Any:
    """The typer command of `scenario`: a function whose signature is its options."""

    def command(**values: Any) -> None:
        run_command(scenario, values, console)

    command.__signature__ = inspect.Signature([parameter(o, panel) for o, panel in command_options(scenario)])  # type: ignore[attr-defined]  # a function declares no __signature__; inspect.signature (so typer) reads the one set here
    command.__name__ = f"run_{scenario.name}"
    command.__doc__ = scenario.summary
    return command


for _name in scenarios.in_order():
    run_app.command(_name)(build_command(scenarios.get(_name)))

__all__ = ["build_command", "command_options", "parameter", "target_options"]
