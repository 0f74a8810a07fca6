"""`loadproof report RUN_DIR`: what a run measured, recomputed from its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.common import console, show_report
from loadproof.scenarios.load.series import is_series_folder, report_series


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR")]) -> None:
    """Recompute the claims of a run directory and write claims.json, report.md and report.html (a load
    sweep or rate search folder: its summary, from its run directories)."""
    if is_series_folder(run_dir):
        report_series(run_dir, console)
    else:
        show_report(run_dir)
    ui.out.print(f"html: {run_dir / 'report.html'}", markup=False, highlight=False)
