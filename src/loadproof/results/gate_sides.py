"""The gate's two sides (docs/ci-gate.md): a run directory, its claims recomputed from its records as `compare`
does, so a run written before intervals has them; or the stored run a query selects (`--baseline QUERY`), its
claims as the store keeps them (claims.json's, with their intervals).

A QUERY picks the newest stored run of the gated run's scenario, other than the run itself (a CI job may have
added it already), that matches: `last` (any), `KEY=VALUE,...` (the store's fields, `results.model.WHERE_KEYS`:
profile, model, engine_version...), or a run id. A stored run's plan is read from its run directory where that is
still on this machine, and the workloads compared; where it is not, the gate says it could not compare them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadproof.errors import LoadproofError, UsageError
from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim
from loadproof.metrics.gate import Figure
from loadproof.metrics.intervals import Interval
from loadproof.plans import Plan, load_plan
from loadproof.results.model import WHERE_KEYS, StoredClaim, StoredRun
from loadproof.results.store import open_store
from loadproof.store.run_dir import MANIFEST, load_run

LAST = "last"


class NoBaseline(UsageError):
    """The store holds no run the query selects (a first run, or a query that matches nothing)."""


@dataclass(frozen=True)
class GateSide:
    """One side of the gate: a run's id, scenario, figures (claim name -> Figure), its plan where known, and
    where it was read from (a path, or the store)."""

    run_id: str
    scenario: str
    figures: dict[str, Figure]
    plan: Plan | None
    where: str
    notes: tuple[str, ...] = ()  # what could not be checked about this side


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
    if "/" in baseline or baseline.startswith("."):
        raise UsageError(f"--baseline {baseline}: no run directory there")
    where = query_of(baseline, scenario)
    with open_store(store_url) as store:
        found = [r for r in store.query(where=where) if r.run_id != run_id]
        shown = store.shown
    if not found:
        conditions = ", ".join(f"{k}={v}" for k, v in where.items())
        raise NoBaseline(f"--baseline {baseline}: no stored run other than {run_id} matches {conditions} in {shown}")
    return side_of_stored(found[0], shown)


def query_of(baseline: str, scenario: str) -> dict[str, str]:
    """The store fields a QUERY asks: `last`, `KEY=VALUE,...` or a run id; the run's scenario unless it names one
    (a run id matches in any scenario, so that another scenario's run is said as such)."""
    text = baseline.strip()
    if not text:
        raise UsageError("--baseline: give a run directory, `last`, KEY=VALUE,... or a run id")
    if text == LAST:
        return {"scenario": scenario}
    if "=" not in text:
        return {"run_id": text}
    where: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not key or not value:
            raise UsageError(f"--baseline {baseline}: each condition is KEY=VALUE ({', '.join(WHERE_KEYS)})")
        if key not in WHERE_KEYS:
            raise UsageError(f"--baseline {baseline}: {key} is not a stored field; one of {', '.join(WHERE_KEYS)}")
        where[key] = value
    return {"scenario": scenario, **where}


def figure_of(claim: StoredClaim) -> Figure | None:
    """A stored numeric claim as the gate reads it; None for a text or a yes/no."""
    if not claim.is_number or claim.kind not in ("figure", "count"):
        return None
    interval = None
    if claim.low is not None and claim.high is not None and claim.confidence is not None:
        interval = Interval(claim.low, claim.high, claim.confidence, claim.method or "")
    return Figure(float(claim.value), claim.unit, interval)


def side_of_stored(stored: StoredRun, shown: str) -> GateSide:
    """A stored run: its claims as stored; its plan from its run directory where that is still here."""
    figures = {name: fig for name, claim in stored.claims.items() if (fig := figure_of(claim)) is not None}
    plan: Plan | None = None
    notes: tuple[str, ...] = ()
    directory = Path(stored.path) if stored.path else None
    if directory is not None and (directory / MANIFEST).is_file():
        try:
            plan = load_plan(load_run(directory))
        except LoadproofError as exc:
            notes = (f"the workloads were not compared: the baseline's run directory cannot be read ({exc})",)
    else:
        notes = (
            f"the workloads were not compared: the baseline's run directory ({stored.path}) is not on this machine",
        )
    where = f"store {shown}, run {stored.path}" if stored.path else f"store {shown}"
    return GateSide(stored.run_id, stored.scenario or "", figures, plan, where, notes)


__all__ = [
    "LAST",
    "GateSide",
    "baseline_side",
    "figure_of",
    "figures_of",
    "query_of",
    "side_of_run_dir",
    "side_of_stored",
]
