"""Which command modules a command line needs.

`loadproof run load ...` imports the module of the `run` commands, not every command's: each command module
imports what its commands use (the results store's SQLAlchemy, the simulator's server, the predictors, the
report's pages), and a command that imported them all started in about 1 s, most of it imports its own work
never reaches. A line whose command is not named here (`--help`, no command, a misspelling) imports every module,
so help lists every command and a misspelling gets its suggestions; so does `from loadproof.cli import app`.
tests/unit/cli/test_command_modules.py checks that each command's modules alone register the command exactly as
the whole set does.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

# every command module, in the order `loadproof --help` lists their commands
ORDER = (
    "compare",
    "demo",
    "export",
    "gate",
    "ingest",
    "plan",
    "profiles",
    "publish",
    "report",
    "results",
    "run",
    "serve",
    "sim",
    "track",
    "tune",
)
# command (the first word after `loadproof`) -> the modules that register it and what it runs
MODULES: dict[str, tuple[str, ...]] = {
    "compare": ("compare",),
    "demo": ("demo",),
    "export": ("export",),
    "gate": ("gate",),
    "import": ("ingest",),
    "plan": ("plan",),
    "profiles": ("profiles",),
    "publish": ("publish",),
    "verify": ("publish",),
    "report": ("report",),
    "store": ("results",),
    "history": ("results",),
    "run": ("run",),
    "serve": ("serve",),
    "relay": ("serve",),
    "router": ("serve",),
    "sim": ("sim",),
    "track": ("track",),
    "tune": ("tune",),
}


def command_of(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def needed(argv: Sequence[str]) -> tuple[str, ...]:
    """The command modules `argv` (what follows `loadproof`) needs: its command's, else every one."""
    command = command_of(argv)
    return MODULES.get(command, ORDER) if command is not None else ORDER


def load(modules: Sequence[str] = ORDER) -> None:
    """Import command modules (each registers its commands on `cli.apps.app` once, on first import)."""
    for module in modules:
        importlib.import_module(f"loadproof.cli.{module}")
