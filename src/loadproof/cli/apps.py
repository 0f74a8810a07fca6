"""The typer applications: `app` and its `run` group, on which each command module registers its commands.

They live apart from the package's `__init__`, which imports every command module, so that a command module
importing them does not import its own importer.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="loadproof",
    help="Verified capacity, honest comparison and checkable publication for self-hosted LLMs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
run_app = typer.Typer(help="Run a scenario against an OpenAI-compatible server.", no_args_is_help=True)
app.add_typer(run_app, name="run")
