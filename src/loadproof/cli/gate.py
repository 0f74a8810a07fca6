"""`loadproof gate RUN --baseline QUERY|RUN_DIR [--budget ...]`: exit 0 when every budgeted figure held, 1 when one
moved past its budget by its interval (or could not be judged, with --missing fail), 2 on bad input (a QUERY that
matches no stored run too, unless --no-baseline pass)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.metrics.gate import DEFAULT_BUDGETS, MISSING_POLICIES, SUCCESS_BUDGET
from loadproof.results.gate import NO_BASELINE_POLICIES, gate, lines_of, write_json


@app.command("gate")
def gate_command(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="the run directory to gate")],
    baseline: Annotated[
        str,
        typer.Option(
            metavar="QUERY|RUN_DIR",
            help="a run directory, or the store's newest run of RUN's scenario that matches: KEY=VALUE,... "
            "(profile=X,model=Y), a run id, or `last`",
        ),
    ],
    budget: Annotated[
        str | None,
        typer.Option(
            metavar="FIGURE=+PCT%,...",
            help=f"how far each figure may move in its bad direction, in % of the baseline or in percentage points "
            f"(success=-1pp) (default: {DEFAULT_BUDGETS}; {SUCCESS_BUDGET} is added to budgets that do not name "
            "success)",
        ),
    ] = None,
    store: Annotated[
        str | None, typer.Option(metavar="URL", help="the results store a QUERY reads (default: the store's own)")
    ] = None,
    missing: Annotated[
        str,
        typer.Option(
            metavar="|".join(MISSING_POLICIES),
            help="a figure that cannot be judged (absent, or no interval): fail the gate, or report it and pass",
        ),
    ] = "fail",
    no_baseline: Annotated[
        str,
        typer.Option(
            metavar="|".join(NO_BASELINE_POLICIES),
            help="a QUERY that matches no stored run: bad input (exit 2), or pass, said as such (a new store's "
            "first run)",
        ),
    ] = "fail",
    anyway: Annotated[bool, typer.Option(help="gate runs whose workloads differ (said on screen)")] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", metavar="FILE", help="also write the result as JSON for CI")
    ] = None,
) -> None:
    """Hold a run against its baseline: fail only on a change whose whole 95% interval is past its budget;
    print the verdict, then each figure's evidence (docs/ci-gate.md)."""
    result = gate(run_dir, baseline, budget, store, missing, anyway, no_baseline)
    lines = lines_of(result)
    ui.out.print(lines[0], style="bold", markup=False, highlight=False, soft_wrap=True)
    for line in lines[1:]:
        ui.out.print(line, markup=False, highlight=False, soft_wrap=True)
    if json_out is not None:
        write_json(result, json_out)
        ui.out.print(f"result: {json_out}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)
