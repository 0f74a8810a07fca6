"""`loadproof track`: one run sent to each tracker asked for, the options checked before anything is read.

Each tracker says in one line what it did (`Outcome.line`); a second `track` of a run MLflow already holds says so
and logs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadproof.errors import UsageError
from loadproof.trackers import llm_d, mlflow_run, otlp
from loadproof.trackers.llm_d_schema import VERSION
from loadproof.trackers.source import open_run


@dataclass(frozen=True)
class Outcome:
    tracker: str  # mlflow, otlp or llm-d
    line: str


def track(
    run: Path,
    *,
    mlflow: str | None = None,
    experiment: str = mlflow_run.EXPERIMENT,
    otlp_target: str | None = None,
    llm_d_file: Path | None = None,
) -> list[Outcome]:
    """Send the run at `run` (a run directory or a one-run bundle) to MLflow, OTLP and an llm-d report."""
    if mlflow is None and otlp_target is None and llm_d_file is None:
        raise UsageError("nothing to track to: give --mlflow URI, --otlp FOLDER|URL or --llm-d FILE")
    if mlflow is not None and not mlflow.strip():
        raise UsageError("--mlflow: give a tracking URI (http://HOST:5000, sqlite:///PATH, file:PATH)")
    if not experiment.strip():
        raise UsageError("--experiment: give a name")
    if otlp_target is not None:
        otlp.check_target(otlp_target)
    if llm_d_file is not None:
        llm_d.check_target(llm_d_file)
    tracked = open_run(run)
    out: list[Outcome] = []
    if mlflow is not None:
        done = mlflow_run.track(tracked, mlflow, experiment)
        where = f"{done.uri}, experiment {experiment} ({done.experiment_id})"
        if done.new:
            line = f"{tracked.run_id}: MLflow run {done.mlflow_run_id} at {where}: {done.params} params, {done.metrics} metrics"
        else:
            line = f"{tracked.run_id}: already tracked as MLflow run {done.mlflow_run_id} at {where}; nothing logged"
        out.append(Outcome("mlflow", line))
    if otlp_target is not None:
        sent = otlp.export(tracked, otlp_target)
        verb = "sent to" if otlp_target.startswith(("http://", "https://")) else "written to"
        out.append(
            Outcome(
                "otlp", f"{tracked.run_id}: {sent.spans} spans and {sent.metrics} metric points {verb} {sent.where}"
            )
        )
    if llm_d_file is not None:
        llm_d.write(tracked, llm_d_file)
        out.append(Outcome("llm-d", f"{tracked.run_id}: llm-d benchmark report {VERSION} written to {llm_d_file}"))
    return out
