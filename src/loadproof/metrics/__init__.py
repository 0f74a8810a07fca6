"""Claims as pure functions of stored runs: each names its formula and unit.

`claim_functions` maps a scenario name to the function computing its claims from a loaded Run and its
typed plan (`loadproof.plans`); `compute_claims(run)` is every claim of a run, the one definition
`report`, `publish`, `compare` and `verify` share. Standard library, msgspec and the stored records
only: `verify` reaches this package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from loadproof.catalog import column
from loadproof.metrics.claims import Claim, claims_payload
from loadproof.metrics.energy import energy_claims
from loadproof.metrics.engine_agreement import agreement_claims
from loadproof.metrics.fleet import fleet_claims
from loadproof.metrics.imported import stated_claims
from loadproof.metrics.offload import offload_claims
from loadproof.metrics.prediction import prediction_claims
from loadproof.metrics.telemetry import telemetry_claims
from loadproof.plans import Plan, load_plan, scenario_of
from loadproof.registry import Registry

if TYPE_CHECKING:
    from loadproof.store.run_dir import Run

ClaimFunction = Callable[["Run", Plan], list[Claim]]  # a scenario's claims_of_run(run, plan)

claim_functions: Registry[ClaimFunction] = Registry.over("scenario", column("claims"))


def compute_claims(run: Run) -> list[Claim]:
    """The scenario's claims, then engine agreement, a KV connector's tier, a fleet's replicas (`metrics.fleet`),
    telemetry, energy and cost claims, and the judgement of its prediction contract if it has one, from the run's
    stored data."""
    plan = load_plan(run)
    claims = (
        scenario_claims(run, plan)
        + agreement_claims(run.records, run.samples, run.manifest.crosscheck or 1)
        + offload_claims(run.records, run.samples)
        + fleet_claims(run)
        + telemetry_claims(run.telemetry)
        + energy_claims(run, plan)
    )
    return claims + prediction_claims(run.manifest.prediction, claims)


def scenario_claims(run: Run, plan: Plan | None = None) -> list[Claim]:
    """The scenario's own claims, from the run and its plan (which `load_plan` checks and types); an imported run
    without per-request data: the figures its file states (`metrics.imported`)."""
    source = run.manifest.source
    if source is not None and not source.per_request:
        return stated_claims(source)
    claims_of = claim_functions.get(scenario_of(run))
    return claims_of(run, load_plan(run) if plan is None else plan)


__all__ = ["Claim", "claim_functions", "claims_payload", "compute_claims", "scenario_claims"]
