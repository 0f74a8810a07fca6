"""`loadproof export`: a run directory's requests, chunks, metric samples, events, telemetry and claims (each
with its interval) as CSV or Parquet tables, for pandas, DuckDB and the like."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.report.claims_table import export_with_claims
from loadproof.store.export import EXPORT_MANIFEST, check_format


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR")],
    fmt: Annotated[str, typer.Option("--format", help="csv, or parquet (needs pyarrow: the parquet extra)")] = "csv",
    out: Annotated[
        Path | None, typer.Option(help="folder for the tables, new or empty (default: RUN_DIR/export)")
    ] = None,
) -> None:
    """Write one table per kind of data and one of the run's claims (each with its 95% interval), and
    export.json listing their columns and units."""
    check_format(fmt)  # before anything is read or created
    result = export_with_claims(run_dir, out if out is not None else run_dir / "export", fmt)
    for table in result.tables:
        ui.out.print(f"{table.file}: {table.rows:,} rows", markup=False, highlight=False)
    if result.num_torn_lines:
        ui.err.print(
            f"note: {result.num_torn_lines} torn last line(s) of an interrupted run were skipped",
            markup=False,
            highlight=False,
        )
    ui.out.print(f"tables, columns and units: {result.path / EXPORT_MANIFEST}", markup=False, highlight=False)
