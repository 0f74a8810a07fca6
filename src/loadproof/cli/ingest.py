"""`loadproof import FILE`: another tool's results as loadproof runs (docs/import.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.ingest.detect import AUTO, TOOLS
from loadproof.ingest.importing import import_results


@app.command("import")
def import_cmd(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="a result file or folder another tool wrote")],
    tool: Annotated[str, typer.Option(help=f"{AUTO} (from the file), or one of {', '.join(TOOLS)}")] = AUTO,
    profile: Annotated[
        str | None,
        typer.Option(help="the deployment measured (a profile file or a packaged name), for `sim calibrate`"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="where the run directories go")] = Path("runs"),
) -> None:
    """Read vllm bench serve's result JSON, GuideLLM's benchmarks file, AIPerf's profile export or inference-perf's
    lifecycle metrics as loadproof runs: each a run directory that `report`, `compare`, `verify` and the store
    take, marked by its source, with only the claims its data supports."""
    for done in import_results(file, out, tool, profile):
        source = done.report.run.manifest.source
        kind = "per-request records" if source is not None and source.per_request else "stated figures only"
        part = f" {done.parsed.part}" if done.parsed.part else ""
        ui.out.print(
            f"{done.parsed.tool} {done.parsed.version}{part}: {done.path} ({kind}, "
            f"{len(done.report.claims)} claims; report.html there)",
            markup=False,
            highlight=False,
        )
