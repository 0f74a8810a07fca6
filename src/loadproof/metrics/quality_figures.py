"""A quality run's report panels (the catalog entry's `figures`): a headline of its checks (correct of the
items scored, the first few, as the Quality table has them), then `metrics.quality.figures`' tables."""

from __future__ import annotations

from loadproof.metrics.claims import Claim
from loadproof.metrics.figures import Headline, KeyFigure, Panel
from loadproof.metrics.quality import figures as quality_panels
from loadproof.metrics.quality import quality_rows
from loadproof.plans.quality import QualityPlan
from loadproof.store.run_dir import Run

SHOWN = 8  # checks in the headline


def figures(run: Run, plan: QualityPlan, claims: list[Claim]) -> list[Panel]:
    rows = [row for row in quality_rows(claims) if row[1] != "skipped"]
    top: list[Panel] = (
        [
            Headline(
                figures=[
                    KeyFigure(check, f"{correct}/{items}", "correct") for check, correct, items, _ in rows[:SHOWN]
                ],
                note="Each check: items answered correctly of the items scored (answers.jsonl); every check in the "
                "Quality table below.",
            )
        ]
        if rows
        else []
    )
    return top + quality_panels(run, plan, claims)
