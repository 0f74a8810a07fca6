"""The typer applications: `app` and its `run` group, on which each command module registers its commands.

They live apart from the package's `__init__`, which imports every command module, so that a command module
importing them does not import its own importer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

# the commands of a `run` command that takes `--scenario NAME` (one that runs another scenario as its unit):
# command -> unit -> its command (built when first asked for; `cli.run` fills this)
unit_commands: dict[str, dict[str, Callable[[], object]]] = {}


def scenario_of(args: list[str]) -> str | None:
    """The value of `--scenario` among a command's arguments (before any `--`), or None."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--scenario" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--scenario="):
            return arg.partition("=")[2]
    return None


class RunGroup(TyperGroup):
    """`loadproof run`: `run NAME --scenario UNIT ...` is the command generated for that unit (its options with
    NAME's arms, `cli.run.unit_command`), where NAME runs another scenario as its unit; else NAME's own command."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:  # click's, typer's own
        units = unit_commands.get(args[0], {}) if args else {}
        unit = scenario_of(args[1:]) if units else None
        if unit is not None and unit in units:
            return args[0], units[unit](), args[1:]
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="loadproof",
    help="Verified capacity, honest comparison and checkable publication for self-hosted LLMs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
run_app = typer.Typer(cls=RunGroup, help="Run a scenario against an OpenAI-compatible server.", no_args_is_help=True)
app.add_typer(run_app, name="run")
