"""Typed run directory values from the JSON a test writes by hand, through the readers `load_run` uses
(version 1), so a test states a run's rows as they would be stored."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from loadproof.records import RequestRecord
from loadproof.rundir import Answer, EngineSample, Event, TelemetrySample
from loadproof.rundir.fleet_keys import is_fleet_row
from loadproof.store.run_dir import Run
from loadproof.store.schema import read_manifest, read_rows


def rows(kind: str, values: Iterable[Any]) -> list[Any]:
    """Rows of `kind` (metrics, events, telemetry, answers); typed ones pass as they are."""
    out = []
    for value in values:
        out.append(value if not isinstance(value, Mapping) else read_rows(kind, [dict(value)], 1, Path(kind))[0])
    return out


def samples(values: Iterable[Any]) -> list[EngineSample]:
    return rows("metrics", values)


def events(values: Iterable[Any]) -> list[Event]:
    return rows("events", values)


def telemetry(values: Iterable[Any]) -> list[TelemetrySample]:
    return rows("telemetry", values)


def answers(values: Iterable[Any]) -> list[Answer]:
    return rows("answers", values)


def run_of(
    path: Path | None,
    manifest: Mapping[str, Any],
    records: Iterable[RequestRecord] = (),
    *,
    samples: Iterable[Any] = (),
    events: Iterable[Any] = (),
    telemetry: Iterable[Any] = (),
    answers: Iterable[Any] = (),
) -> Run:
    metric_rows = rows("metrics", samples)
    return Run(
        path=path,  # type: ignore[arg-type]  # None for a run that is only in memory: what reads it needs no folder
        manifest=read_manifest(manifest),
        records=list(records),
        samples=[s for s in metric_rows if not is_fleet_row(s.source)],  # as store.load_run splits metrics.jsonl
        fleet_samples=[s for s in metric_rows if is_fleet_row(s.source)],
        events=rows("events", events),
        telemetry=rows("telemetry", telemetry),
        answers=rows("answers", answers),
    )
