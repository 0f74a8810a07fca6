"""`loadproof report RUN_DIR`: what a run measured, recomputed from its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.common import console, show_report
from loadproof.errors import RunDirError
from loadproof.report.index import INDEX_HTML, build_index, is_runs_folder, kind_of
from loadproof.scenarios.load.series import is_series_folder, report_series
from loadproof.scenarios.repeats import is_repeats_folder, report_repeats


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR")]) -> None:
    """Recompute the claims of a run directory and write claims.json, report.md and report.html (a load
    sweep or rate search folder: its summary, from its run directories; a --repeats or `run ab --scenario`
    folder: its table, from its run directories; a folder of runs: each one's report and index.html linking
    them)."""
    if is_series_folder(run_dir):
        report_series(run_dir, console)
    elif is_repeats_folder(run_dir):
        report_repeats(run_dir, console)
    elif is_runs_folder(run_dir):
        for child in sorted(run_dir.iterdir()):
            if kind_of(child) == "series":
                try:
                    report_series(child, console)
                except RunDirError as error:  # a summary of another kind (a capacity search): indexed as it is
                    console.say(f"{child}: summary not recomputed ({error})")
        rows = build_index(run_dir)
        ui.table(
            f"{len(rows)} runs and series in {run_dir}",
            ["run", "scenario", "verdict", "key figure"],
            [[row.name, row.kind, row.verdict, row.figure] for row in rows],
        )
        ui.out.print(f"html: {run_dir / INDEX_HTML}", markup=False, highlight=False)
        return
    else:
        show_report(run_dir)  # its headline ends with report.html's path
