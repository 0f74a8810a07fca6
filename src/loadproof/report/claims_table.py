"""The `claims` table of `loadproof export`: every claim of the run, recomputed from its records as `report`
computes them (`metrics.compute_claims`), one row each, beside the run's data tables (store/export.py).

Each row: the claim's name, its exact value (a number; null for a text, a yes/no or a verdict, which `printed`
holds), its printed figure, unit, kind and direction, its 95% confidence interval (`interval_low`,
`interval_high` in the claim's unit, `interval_confidence`, `interval_method`: claims.json's `interval`, null
where the claim has none), and its formula. A run whose claims cannot be computed (interrupted before its plan
was written) still exports its data: its claims table has no rows, and its description in export.json says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loadproof.errors import LoadproofError
from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim
from loadproof.store.export import Export, export_run
from loadproof.store.export_table import FLOAT, STR, Column, Table
from loadproof.store.run_dir import Run

CLAIMS_TABLE = "claims"
DESCRIPTION = "one row per claim, recomputed from the run's records as `loadproof report` computes them"
COLUMNS = [
    Column("name", STR, None, "the claim's name (docs/scenarios.md and the other scenario pages)"),
    Column("value", FLOAT, "the claim's unit", "the exact value of a number; null for a text, yes/no or verdict"),
    Column("printed", STR, None, "the value as claims.json and report.md print it (verify compares at this precision)"),
    Column("unit", STR),
    Column("kind", STR, None, "figure, count, fact, verdict or criterion"),
    Column("direction", STR, None, "which way is better: higher, lower or neither"),
    Column("interval_low", FLOAT, "the claim's unit", "the confidence interval's lower bound; null without one"),
    Column("interval_high", FLOAT, "the claim's unit", "the confidence interval's upper bound; null without one"),
    Column("interval_confidence", FLOAT, None, "the interval's level (0.95); null without one"),
    Column("interval_method", STR, None, "how the interval was computed (order statistics, batch means, Wilson score)"),
    Column("formula", STR, None, "how the claim is computed, in words"),
]


def claim_row(claim: Claim) -> list[Any]:
    """A claim as a row of `COLUMNS`."""
    value = claim.value
    number = None if isinstance(value, (bool, str)) else float(value)
    interval = claim.interval
    bounds: list[Any] = (
        [None] * 4 if interval is None else [interval.low, interval.high, interval.confidence, interval.method]
    )
    return [claim.name, number, claim.printed, claim.unit, claim.kind, claim.direction, *bounds, claim.formula]


def claims_tables(run: Run) -> list[Table]:
    """The claims table of the run (without rows, saying why, where its claims cannot be computed)."""
    try:
        claims = compute_claims(run)
        description = DESCRIPTION
    except LoadproofError as exc:
        claims, description = [], f"none: the run's claims cannot be computed ({exc})"

    def rows() -> Iterator[list[Any]]:
        for claim in claims:
            yield claim_row(claim)

    return [Table(CLAIMS_TABLE, description, COLUMNS, rows)]


def export_with_claims(run_dir: Path, out: Path, fmt: str = "csv") -> Export:
    """`loadproof export`: the run's tables (store/export.py), then its claims."""
    return export_run(run_dir, out, fmt, claims_tables)


__all__ = ["CLAIMS_TABLE", "COLUMNS", "claim_row", "claims_tables", "export_with_claims"]
