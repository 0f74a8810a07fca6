"""A synthetic load run written as `run load` writes one (a manifest with its plan, the schedule's start, the
records), for the tests that publish it and tamper with its recomputed figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from loadproof.plans.load import LoadPlan
from loadproof.store.run_dir import RunWriter
from tests.unit.metrics.test_load import T0


def write_load_run(root: Path, name: str, plan: LoadPlan, records: list[Any]) -> Path:
    """The run directory `root/name` of a load run with `plan` and `records`."""
    with RunWriter(root / name) as writer:
        writer.write_manifest(
            {
                "run_id": name,
                "scenario": "load",
                "target": {"model": "tiny", "endpoint": "completions"},
                "plan": msgspec.to_builtins(plan),
                "plan_version": LoadPlan.version,
            }
        )
        writer.event("schedule_start", t_ns=T0, worker=0, planned=len(records))
        for record in records:
            writer.append(record)
    return root / name
