"""The gate's two sides (docs/ci-gate.md): a run directory, its claims recomputed from its records as `compare`
does, so a run written before intervals has them; or the baseline a store query selects
(results/gate_baseline.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadproof.errors import UsageError
from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim
from loadproof.metrics.gate import Figure
from loadproof.plans import Plan, load_plan
from loadproof.store.run_dir import load_run


@dataclass(frozen=True)
class GateSide:
    """One side of the gate: a run's id, scenario, figures (claim name -> Figure), its plan where known, and
    where it was read from (a path, or the store)."""

    run_id: str
    scenario: str
    figures: dict[str, Figure]
    plan: Plan | None
    where: str


def figures_of(claims: list[Claim]) -> dict[str, Figure]:
    """The numeric claims (figures and counts) as the gate reads them: value, unit, interval."""
    out = {}
    for c in claims:
        if c.is_number and isinstance(c.value, (int, float)) and not isinstance(c.value, bool):
            out[c.name] = Figure(float(c.value), c.unit, c.interval)
    return out


def side_of_run_dir(path: Path) -> GateSide:
    """A run directory: its claims recomputed from its records."""
    run = load_run(path)
    return GateSide(run.run_id, str(run.manifest.scenario), figures_of(compute_claims(run)), load_plan(run), str(path))


def baseline_side(baseline: str, scenario: str, run_id: str, store_url: str | None) -> GateSide:
    """`--baseline`: an existing run directory, or a query of the store for a run of `scenario` other than
    `run_id`."""
    path = Path(baseline)
    if path.is_dir():
        return side_of_run_dir(path)
    raise UsageError(f"--baseline {baseline}: no run directory there, and the results store is not built yet")


__all__ = ["GateSide", "baseline_side", "figures_of", "side_of_run_dir"]
