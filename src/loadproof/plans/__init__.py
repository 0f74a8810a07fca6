"""Scenario plans: what a scenario planned, typed, as it writes it into `manifest.json` and as the
metrics, `compare` and `verify` read it back.

Each scenario has one schema here (a msgspec Struct subclassing `Plan`), found by scenario name in
`schemas` (a view of `loadproof.catalog.SCENARIOS`). The scenario builds the typed plan and stores it with
`attach_plan`, which sets the manifest's `plan` and `plan_version`; `load_plan(run)` reads it back.

Versions: each schema has a `version`. A manifest without `plan_version` is version 1 (the shape
every scenario wrote before plans were typed). An older version is brought up to date by the schema's
`upgrade` (e.g. a version 1 throughput run had no plan: its options stand in), then converted; a newer
version than this loadproof knows, or a plan that does not fit its schema, is one RunDirError naming
the run, the scenario and what is wrong.

Standard library and msgspec only: `verify` reaches this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from loadproof.catalog import column
from loadproof.errors import RunDirError
from loadproof.registry import Registry

if TYPE_CHECKING:
    from loadproof.rundir import Manifest
    from loadproof.store.run_dir import Run

UNVERSIONED = 1  # what a manifest without `plan_version` holds


class Plan(msgspec.Struct, kw_only=True):
    """Base of every scenario's plan schema."""

    version: ClassVar[int] = 1

    @classmethod
    def upgrade(cls, raw: Any, version: int, manifest: Manifest) -> Any:
        """The stored plan of an older `version`, in this version's shape (None: there is none)."""
        return raw

    def workload(self) -> dict[str, Any]:
        """What the scenario was asked to do, by name: two runs compare only when these are equal."""
        return {}


schemas: Registry[type[Plan]] = Registry.over("scenario", column("plan"))


def attach_plan(manifest: Manifest, plan: Plan) -> None:
    """Put `plan` into the manifest, with its schema's version (the scenario then writes the manifest)."""
    manifest.plan = msgspec.to_builtins(plan)
    manifest.plan_version = type(plan).version


def scenario_of(run: Run) -> str:
    """The scenario the run's manifest names."""
    scenario = run.manifest.scenario
    if scenario is None:
        raise RunDirError(f"{run.path}/manifest.json names no scenario")
    return scenario


def load_plan(run: Run) -> Plan:
    """The run's plan, typed by its scenario's schema (older versions brought up to date)."""
    where = f"{run.path}/manifest.json"
    scenario = scenario_of(run)
    schema = schemas.get(scenario)
    version = UNVERSIONED if run.manifest.plan_version is None else run.manifest.plan_version
    if version < 1:
        raise RunDirError(f"{where}: plan_version {version!r} of the {scenario} plan is not a version number")
    if version > schema.version:
        raise RunDirError(
            f"{where}: the {scenario} plan is version {version}, newer than this loadproof reads "
            f"(up to {schema.version}); use a newer loadproof"
        )
    raw: Any = run.manifest.plan
    if version < schema.version:
        raw = schema.upgrade(raw, version, run.manifest)
    if raw is None:
        raise RunDirError(
            f"{run.path}: the {scenario} run was interrupted before its plan was written; nothing to report"
        )
    try:
        return msgspec.convert(raw, schema)
    except msgspec.ValidationError as exc:
        raise RunDirError(f"{where}: the {scenario} plan (version {version}) is malformed: {exc}") from None


def workload_difference(a: Plan, b: Plan) -> list[str]:
    """`name a vs b` for each workload setting that differs between two plans of one scenario."""
    wa, wb = a.workload(), b.workload()
    return [
        f"{key} {_shown(wa.get(key))} vs {_shown(wb.get(key))}"
        for key in dict.fromkeys([*wa, *wb])
        if wa.get(key) != wb.get(key)
    ]


def workload_text(plan: Plan) -> str:
    return ", ".join(f"{key} {_shown(value)}" for key, value in plan.workload().items())


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_shown(v) for v in value) or "none"
    if isinstance(value, dict):
        return ",".join(f"{k}={_shown(v)}" for k, v in value.items()) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None else str(value)


__all__ = ["Plan", "attach_plan", "load_plan", "scenario_of", "schemas", "workload_difference", "workload_text"]
