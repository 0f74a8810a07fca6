"""`loadproof compare BASE CAND`: change tables against every baseline, and an ACCEPT/REJECT decision.

Exit 0 ACCEPT, 1 REJECT, 2 bad input (a missing run, runs of different scenarios or workloads without
--anyway, runs with no shared claim) or no verdict (no shared figure a budget applies to).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.common import console
from loadproof.errors import UsageError
from loadproof.metrics import compute_claims
from loadproof.report.compare import (
    DEFAULT_SEED,
    NO_VERDICT,
    Side,
    add_answer_changes,
    build_side,
    compare,
    parse_percent,
)
from loadproof.report.compare_headline import SHOWN_REASONS, client_line, decision_lines, key_lines, tally_lines
from loadproof.report.compare_html import render_compare_html
from loadproof.report.compare_markdown import legend, render_markdown, table
from loadproof.store.run_dir import load_run

RunsArgument = "run directory; several, comma-separated, are repeats of one side"


def load_side(text: str) -> Side:
    paths = [Path(p.strip()) for p in text.split(",") if p.strip()]
    if not paths:
        raise UsageError(f"no run directory in {text!r}")
    return build_side(text, [load_run(p) for p in paths], compute_claims)


@app.command("compare")
def compare_command(
    base: Annotated[str, typer.Argument(metavar="BASE", help=f"the baseline {RunsArgument}")],
    cand: Annotated[str, typer.Argument(metavar="CAND", help=f"the candidate {RunsArgument}")],
    baseline: Annotated[list[str] | None, typer.Option(help="another baseline (repeatable)")] = None,
    max_slowdown: Annotated[
        str | None,
        typer.Option(
            metavar="PCT", help="REJECT when a throughput or latency claim is worse than this, against any baseline"
        ),
    ] = None,
    require: Annotated[
        list[str] | None,
        typer.Option(metavar="SCENARIO", help="the candidate must hold SCENARIO.verdict == PASS (repeatable)"),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="also write the comparison to this file: FILE.html a page with the sides' distributions "
            "overlaid, any other name Markdown"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap intervals (with repeats)")] = DEFAULT_SEED,
    anyway: Annotated[
        bool, typer.Option(help="compare runs whose scenario or workload differs (said on screen)")
    ] = False,
    judge_client: Annotated[
        bool,
        typer.Option(help="let the client's own send lag, client lag and queue wait decide too (they never do else)"),
    ] = False,
) -> None:
    """Change of every shared claim against every baseline, side by side; ACCEPT or REJECT against budgets.
    Prints the decision first, the changes that decide it and the scenario's key figures; `-v` every claim."""
    budget = parse_percent(max_slowdown) if max_slowdown is not None else None
    bases = [load_side(text) for text in [base, *(baseline or [])]]
    candidate = load_side(cand)
    result = compare(
        candidate,
        bases,
        max_slowdown=budget,
        required=require or [],
        seed=seed,
        anyway=anyway,
        judge_client=judge_client,
    )
    add_answer_changes(result)
    say = ui.out.print
    lines = decision_lines(result, shown=None if console.verbose else SHOWN_REASONS) + tally_lines(result)
    say(lines[0], style="bold", markup=False, highlight=False)
    for line in lines[1:]:
        say(line, markup=False, highlight=False)
    for line in legend(result):
        say(line, markup=False, highlight=False)
    for difference in result.differences:
        ui.err.print(f"runs differ, compared anyway: {difference}", style="yellow", markup=False, highlight=False)
    if console.verbose:
        header, rows = table(result)
        ui.table("Change = (candidate - baseline) / baseline", header, rows)
        for label, changes in result.answers:
            ui.table(f"Answers against {label}", ["category", "count"], [[k, str(len(v))] for k, v in changes.items()])
        for note in result.notes:
            say(f"note: {note}", markup=False, highlight=False)
    else:
        for line in key_lines(result):
            say(line, markup=False, highlight=False)
        for label, changes in result.answers:
            counts = ", ".join(f"{k} {len(v)}" for k, v in changes.items())
            say(f"answers against {label}: {counts}", markup=False, highlight=False)
        client = client_line(result)
        if client is not None:
            say(client, markup=False, highlight=False)
    markdown = render_markdown(result)
    if out is not None:
        try:
            out.write_text(render_compare_html(result) if out.suffix == ".html" else markdown, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc.strerror}") from None
        say(f"comparison: {out}", markup=False, highlight=False)
    elif not console.verbose:
        say(f"every claim ({len(result.names)}): -v, or --out FILE for Markdown", markup=False, highlight=False)
    if result.verdict == NO_VERDICT:
        raise UsageError(f"no verdict: {'; '.join(result.reasons)}")
    if result.reasons:
        raise typer.Exit(code=1)
