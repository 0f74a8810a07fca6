"""`loadproof track`: a run sent to the trackers users keep: MLflow, OpenTelemetry (OTLP), llm-d's benchmark report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.trackers.mlflow_run import EXPERIMENT
from loadproof.trackers.tracking import track as send


@app.command()
def track(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="a run directory, or a bundle that holds one run")],
    mlflow: Annotated[
        str | None,
        typer.Option(
            "--mlflow",
            metavar="URI",
            help="an MLflow tracking URI (http://HOST:5000): one MLflow run per run, by run id (the mlflow extra)",
        ),
    ] = None,
    experiment: Annotated[str, typer.Option(help="the MLflow experiment (made if new)")] = EXPERIMENT,
    otlp: Annotated[
        str | None,
        typer.Option(
            "--otlp",
            metavar="FOLDER|URL",
            help="OpenTelemetry spans and metrics (GenAI conventions) as OTLP JSON: a new folder, or an OTLP/HTTP "
            "receiver's URL (http://HOST:4318) (the otel extra)",
        ),
    ] = None,
    llm_d: Annotated[
        Path | None, typer.Option("--llm-d", metavar="FILE", help="an llm-d benchmark report (v0.2.1, JSON) to write")
    ] = None,
) -> None:
    """Send a run to MLflow (params, every figure with its interval, the run or bundle as an artifact), to an
    OpenTelemetry collector or file (one span per request), or to an llm-d benchmark report. docs/trackers.md."""
    for outcome in send(run_dir, mlflow=mlflow, experiment=experiment, otlp_target=otlp, llm_d_file=llm_d):
        ui.out.print(outcome.line, markup=False, highlight=False)
