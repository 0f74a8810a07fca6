"""A tune's result: one row per grid point, predicted and measured, shown on the command line and written as
`tune.md`, `tune.json` (typed: `rundir.tune.TuneTable`) and `pareto.svg`.

A highest passing rate that is a lower bound (its search found no failing rate above it: every rate passed
up to --search-max) is shown as one, "at least R", and never compared with the other side as if it were the
maximum: the point's `predicted vs measured` is left empty and its status says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadproof.rundir.tune import Measured, Predicted, SearchOutcome, TunePoint, TuneTable
from loadproof.store.series import TUNE_TABLE, write_document
from loadproof.tune.grid import Point
from loadproof.tune.pareto import Scored, pareto_svg

BOUND = "a lower bound: every rate tried passed, up to --search-max"


@dataclass
class PointResult:
    point: Point
    predicted: Predicted
    measured: Measured | None = None
    pruned: str = ""  # why it was not measured
    dominated_by: str | None = None  # the point that beats it on every axis, as predicted

    @property
    def status(self) -> str:
        if not self.predicted.max_rate_rps:
            return f"pruned: {self.pruned}"
        front = f"dominated by {self.dominated_by} (predicted)" if self.dominated_by else "on the predicted front"
        said = [f"{'measured' if self.measured else 'not measured: ' + self.pruned}; {front}"]
        said += [f"{side}: {BOUND}" for side, outcome in self.sides() if outcome.lower_bound]
        return "; ".join(said)

    def sides(self) -> list[tuple[str, SearchOutcome]]:
        return [("predicted", self.predicted)] + ([("measured", self.measured)] if self.measured else [])

    @property
    def scored(self) -> Scored:
        p = self.predicted
        return Scored(self.point.name, p.max_rate_rps or 0.0, p.ttft_p99_s or 0.0, p.kv_gib)

    @property
    def error_pct(self) -> float | None:
        """Predicted vs measured highest passing rate, % of the measured; None where either is a lower bound."""
        p, m = self.predicted, self.measured
        if m is None or not m.max_rate_rps or not p.max_rate_rps or p.lower_bound or m.lower_bound:
            return None
        return 100 * (p.max_rate_rps - m.max_rate_rps) / m.max_rate_rps


@dataclass
class Tune:
    results: list[PointResult]
    folder: Path
    resumed: bool
    notes: list[str] = field(default_factory=list)


TABLE_HEAD = [
    "point",
    "predicted max rate (req/s)",
    "predicted TTFT p99 (s)",
    "KV (GiB)",
    "measured max rate",
    "measured TTFT p99 (s)",
    "predicted vs measured",
    "status",
]


def table_rows(tuned: Tune) -> list[list[str]]:
    """One row per point, as tune.md and the command line show it (TABLE_HEAD)."""
    rows = []
    for r in tuned.results:
        p, m = r.predicted, r.measured
        err = r.error_pct
        rows.append(
            [
                r.point.name,
                _rate(p),
                _num(p.ttft_p99_s, 3),
                f"{p.kv_gib:g}",
                _rate(m),
                _num(m.ttft_p99_s if m else None, 3),
                "" if err is None else f"{err:+.1f}%",
                r.status,
            ]
        )
    return rows


def tune_table(tuned: Tune) -> TuneTable:
    return TuneTable(
        points=[
            TunePoint(
                point=r.point.name,
                settings=r.point.settings,
                predicted=r.predicted,
                measured=r.measured,
                pruned=r.pruned,
                error_pct=r.error_pct,
            )
            for r in tuned.results
        ]
    )


def write_outputs(tuned: Tune) -> None:
    rows = ["| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
    rows += ["| " + " | ".join(row) + " |" for row in table_rows(tuned)]
    (tuned.folder / "tune.md").write_text("# Tune\n\n" + "\n".join(rows) + "\n", encoding="utf-8")
    measured = [
        Scored(r.point.name, r.measured.max_rate_rps or 0.0, r.measured.ttft_p99_s or 0.0, r.predicted.kv_gib)
        for r in tuned.results
        if r.measured
    ]
    svg = pareto_svg("Tune: highest rate meeting the SLO against TTFT p99", [r.scored for r in tuned.results], measured)
    if svg:
        (tuned.folder / "pareto.svg").write_text(svg, encoding="utf-8")
    write_document(tuned.folder / TUNE_TABLE, tune_table(tuned))


def _rate(outcome: SearchOutcome | None) -> str:
    """A search's highest passing rate; a lower bound as one."""
    if outcome is None or outcome.max_rate_rps is None:
        return "-"
    return f"at least {outcome.max_rate_rps:.4g}" if outcome.lower_bound else f"{outcome.max_rate_rps:.4g}"


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


__all__ = ["BOUND", "TABLE_HEAD", "PointResult", "Tune", "table_rows", "tune_table", "write_outputs"]
