"""`loadproof publish` and `loadproof verify`: a sanitized bundle of runs, and its offline check."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.errors import UsageError
from loadproof.publish import publish as write_bundle
from loadproof.verify import verify as check_bundle
from loadproof.verify.display import shown


@app.command()
def publish(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR...",
            help="run directories to publish; a load search or sweep folder publishes its trials "
            "(and a search its own claims)",
        ),
    ],
    out: Annotated[Path, typer.Option(help="the bundle folder to write (must not exist, or be empty)")],
    engine_image: Annotated[str | None, typer.Option(help="the engine's container image id, for provenance")] = None,
    allow_interrupted: Annotated[
        bool,
        typer.Option(
            "--allow-interrupted",
            help="publish an interrupted rate search, its rate as a lower bound (load.search.rate_lower_bound_rps)",
        ),
    ] = False,
) -> None:
    """Write a sanitized bundle: data without addresses, hosts, keys or paths, claims, config, SHA256SUMS."""
    publication = write_bundle(run_dirs, out, engine_image=engine_image, allow_interrupted=allow_interrupted)
    for note in publication.notes:
        ui.out.print(note, markup=False, highlight=False)
    for run in publication.runs:
        ui.out.print(f"{run.run_id}: {run.num_claims} claims", markup=False, highlight=False)
    ui.out.print(
        f"bundle: {publication.path}\ncheck it with: loadproof verify {publication.path}", markup=False, highlight=False
    )


@app.command()
def verify(bundle: Annotated[Path, typer.Argument(metavar="BUNDLE")]) -> None:
    """Recompute every claim of a bundle from its data, offline; exit 1 on any mismatch or changed file.

    VERIFIED means consistent with itself, not authentic: see docs/publish-and-verify.md."""
    try:
        result = check_bundle(bundle)
    except UsageError:
        raise
    except Exception as exc:
        ui.out.print(
            f"FAILED: verify stopped on {shown(type(exc).__name__)}: {shown(str(exc))}", markup=False, highlight=False
        )
        raise typer.Exit(1) from None
    # the verdict first, then a line a claim, and the verdict again where a long listing ends
    ui.out.print(result.summary(), markup=False, highlight=False)
    for line in result.lines():
        ui.out.print(line, markup=False, highlight=False)
    ui.out.print(result.summary(), markup=False, highlight=False)
    if not result.ok:
        raise typer.Exit(1)
