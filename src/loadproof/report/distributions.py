"""Distribution claims (`load.ttft_s.<stat>`, ...) as one row per metric, for the console.

A load run has about 70 such claims (9 latencies x up to 8 statistics); the console shows them as one
row per latency with the columns below, and every other claim as before. report.md keeps every claim.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim
from loadproof.metrics.interval_text import with_interval

COLUMNS = ("mean", "p50", "p90", "p99", "max")
STAT = ".<stat>"


def distribution_table(
    claims: list[Claim], notes: dict[str, str] | None = None
) -> tuple[list[str], list[list[str]], list[Claim]]:
    """(header, one row per metric, the claims not in a row): a claim is in a row when its documented
    name ends with `.<stat>`; statistics not among the columns (std, p95, p99.9) stay in report.md only.
    With `notes` (`metrics.interval_text.interval_notes`), each figure beside its interval (report.html)."""
    rows: dict[str, dict[str, str]] = {}
    units: dict[str, str] = {}
    rest = []
    for claim in claims:
        if not claim.pattern.endswith(STAT):
            rest.append(claim)
            continue
        metric, _, stat = claim.name.rpartition(".")
        rows.setdefault(metric, {})[stat] = claim.printed if notes is None else with_interval(claim, notes)
        units[metric] = claim.unit
    header = ["metric", *COLUMNS, "unit"]
    table = [[metric, *(stats.get(c, "") for c in COLUMNS), units[metric]] for metric, stats in rows.items()]
    return header, table, rest
