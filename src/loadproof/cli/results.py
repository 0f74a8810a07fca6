"""`loadproof store add` and `loadproof history`: the results store (docs/results.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.results.history import HEADER, history, notes, parse_since, rows
from loadproof.results.model import parse_where
from loadproof.results.store import open_store
from loadproof.results.trend import write_page

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="the results store: a SQLite file, sqlite:///FILE or postgresql://USER@HOST:PORT/DB "
        "(default: $LOADPROOF_STORE, else ~/.cache/loadproof/results.db)",
        show_default=False,
    ),
]

store_app = typer.Typer(help="Keep runs in a results store (SQLite or PostgreSQL).", no_args_is_help=True)
app.add_typer(store_app, name="store")


@store_app.command("add")
def store_add(
    paths: Annotated[list[Path], typer.Argument(metavar="RUN|BUNDLE|FOLDER...", show_default=False)],
    store: StoreOption = None,
) -> None:
    """Add runs to the store: a run directory, a published bundle, or every run and bundle under a folder; each
    with its manifest fields, claims and intervals, environment and records' digest. A run already stored (the
    same run and records) is said and left as it is."""
    with open_store(store) as opened:
        outcomes, skipped = opened.add_paths(paths)
        for outcome in outcomes:
            run = outcome.run
            ui.out.print(
                f"{'added' if outcome.new else 'already stored'}  {run.run_id}  "
                f"({run.scenario or 'run'}, {len(run.claims)} claims)",
                markup=False,
                highlight=False,
            )
        for where, why in skipped:
            ui.err.print(f"skipped  {where}: {why}", markup=False, highlight=False)
        new = [o.run for o in outcomes if o.new]
        old = len(outcomes) - len(new)
        claims = sum(len(run.claims) for run in new)
        ui.out.print(
            f"{len(new)} run(s) added ({claims:,} claims), {old} already stored; results store {opened.shown}",
            markup=False,
            highlight=False,
        )


@app.command("history")
def history_command(
    claim: Annotated[str, typer.Argument(metavar="CLAIM", help="a claim's full name, e.g. load.ttft_s.p99")],
    where: Annotated[
        str | None,
        typer.Option(help="only runs with these fields: profile=...,model=...,engine_version=...", show_default=False),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="only runs started since: 2026-12-01, 2026-12-01T10:00 (UTC) or an age: 7d, 12h"),
    ] = None,
    store: StoreOption = None,
    html: Annotated[
        Path | None, typer.Option(help="also write the claim over time as a page (each point links to its run)")
    ] = None,
) -> None:
    """One claim over the stored runs, oldest first: time, run, value with its interval, profile, engine version."""
    conditions, after = parse_where(where), parse_since(since)
    with open_store(store) as opened:
        found = history(opened, claim, conditions, after)
    ui.table(f"{claim}: {len(found.points)} run(s), {found.conditions}", HEADER, rows(found))
    for note in notes(found):
        ui.out.print(note, markup=False, highlight=False, soft_wrap=True)
    if html is not None:
        ui.out.print(f"page: {write_page(found, html)}", markup=False, highlight=False)
