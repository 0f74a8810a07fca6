"""`loadproof tune PROFILE --sim SIM --grid KEY=V1,V2 ... --slo ...`: parse, call `tune.tuning.tune`, print
the table it returns (docs/simulator.md, "Tuning").

The command declares only what is tune's own: PROFILE, `--sim` and `--grid` here, the budget, port and folder
on `tune.options.TuneOptions`. Its traffic and search options are `run load`'s, generated from `LoadOptions`
as `loadproof run load` generates them (`cli.run.parameter`): the same flags, defaults and help, and its
`--tokenizer` is run load's.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.run import parameter, target_options
from loadproof.results.auto import storing
from loadproof.scenarios.load.scenario import LoadScenario
from loadproof.scenarios.options import CliOption, cli_options
from loadproof.tune.options import TARGET_FIELDS, TuneOptions, load_cli_options, tune_request
from loadproof.tune.table import TABLE_HEAD, table_rows
from loadproof.tune.tuning import tune as run_tune


def _say(text: str) -> None:
    ui.err.print(text, markup=False, highlight=False)


def generated() -> list[CliOption]:
    """The options declared elsewhere: tune's own (in `--help`'s "Options", beside PROFILE, --sim and --grid),
    then run load's target's and run load's, each in the panel `run load --help` lists it in."""
    target = [o for o in target_options(LoadScenario) if o.field in TARGET_FIELDS]
    return cli_options(TuneOptions) + target + load_cli_options()


def tune(
    profile_path: Path,
    sim: Path,
    grid: list[str],
    **values: Any,
) -> None:
    """Predict every grid point on the simulator, measure the promising ones for real, print the Pareto table."""
    request = tune_request(profile_path, sim, grid, values)
    with storing(request.options.out, _say):  # LOADPROOF_STORE_AUTO=1: the runs it measured, added to the store
        done = run_tune(request, _say)
    ui.table("Tune: highest rate meeting the SLO, predicted and measured", TABLE_HEAD, table_rows(done))
    _say(f"tune.md, tune.json and pareto.svg in {done.folder}")


_OWN = [
    inspect.Parameter(
        "profile_path",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[
            Path,
            typer.Argument(
                metavar="PROFILE",
                help="the deployment profile the grid varies: a TOML file or a packaged profile's name "
                "(`loadproof profiles`)",
            ),
        ],
    ),
    inspect.Parameter(
        "sim",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[
            Path,
            typer.Option(
                "--sim",
                help="calibrated sim profile (`loadproof sim calibrate`), or a packaged simulator profile's name",
            ),
        ],
    ),
    inspect.Parameter(
        "grid",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[
            list[str],
            typer.Option(
                help="KEY=V1,V2,...: a profile setting (max_num_seqs, scheduler.max_num_batched_tokens, "
                "kv_cache.budget_gib_per_gpu...) and its values; repeat for more keys"
            ),
        ],
    ),
]
tune.__signature__ = inspect.Signature(_OWN + [parameter(o) for o in generated()])  # type: ignore[attr-defined]  # typer reads the generated signature
app.command()(tune)
