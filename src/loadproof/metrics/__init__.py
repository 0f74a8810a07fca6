"""Claims as pure functions of stored runs: each names its formula and unit.

`claim_functions` maps a scenario name to the function computing its claims from a loaded Run;
`compute_claims(run)` is every claim of a run, the one definition `report`, `publish`, `compare` and
`verify` share. Standard library, msgspec and the stored records only: `verify` reaches this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadproof.errors import RunDirError
from loadproof.metrics.claims import Claim, claims_payload
from loadproof.registry import Registry

if TYPE_CHECKING:
    from loadproof.store.run_dir import Run

claim_functions: Registry[object] = Registry("scenario")
claim_functions.register("throughput", "loadproof.metrics.throughput:claims_of_run")
claim_functions.register("capacity", "loadproof.metrics.capacity:claims_of_run")
claim_functions.register("prefill", "loadproof.metrics.prefill:claims_of_run")
claim_functions.register("interference", "loadproof.metrics.interference:claims_of_run")
claim_functions.register("soak", "loadproof.metrics.soak:claims_of_run")
claim_functions.register("quality", "loadproof.metrics.quality:claims_of_run")
claim_functions.register("ab", "loadproof.metrics.ab:claims_of_run")


def compute_claims(run: Run) -> list[Claim]:
    """The scenario's claims, then engine agreement and telemetry claims, from the run's stored data."""
    scenario = run.manifest.get("scenario")
    if scenario is None:
        raise RunDirError(f"{run.path}/manifest.json names no scenario")
    if not isinstance(scenario, str):
        raise RunDirError(f"{run.path}/manifest.json: scenario is not a name")
    if scenario != "throughput" and "plan" not in run.manifest:
        raise RunDirError(f"{run.path} was interrupted before its plan was written; nothing to report")
    from loadproof.metrics.engine_agreement import agreement_claims
    from loadproof.metrics.telemetry import telemetry_claims

    return claim_functions.get(scenario)(run) + agreement_claims(run.records, run.samples) + telemetry_claims(run.telemetry)


__all__ = ["Claim", "claim_functions", "claims_payload", "compute_claims"]
