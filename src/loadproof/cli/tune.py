"""`loadproof tune PROFILE --sim SIM --grid KEY=V1,V2 ... --slo ...`: parse, call `tune.tuning.tune`, print
the table it returns (docs/simulator.md, "Tuning")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.config.profile import load_profile
from loadproof.errors import UsageError
from loadproof.scenarios.options import from_cli
from loadproof.sim.config import is_sim_profile, load_sim_config
from loadproof.tune.tuning import TABLE_HEAD, TuneOptions, table_rows
from loadproof.tune.tuning import tune as run_tune


def _say(text: str) -> None:
    ui.err.print(text, markup=False, highlight=False)


@app.command()
def tune(
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="the deployment profile the grid varies")],
    sim: Annotated[Path, typer.Option("--sim", help="calibrated sim profile (`loadproof sim calibrate`)")],
    grid: Annotated[
        list[str],
        typer.Option(
            help="KEY=V1,V2,...: a profile setting (max_num_seqs, "
            "scheduler.max_num_batched_tokens, kv_cache.budget_gib_per_gpu...) "
            "and its values; repeat for more keys"
        ),
    ],
    slo: Annotated[str, typer.Option(help="the SLO each rate search holds, as `run load --slo`: ttft=1s,tpot=100ms")],
    attainment: Annotated[float, typer.Option(help="the share of requests that must meet the SLO")] = 0.9,
    rate: Annotated[float, typer.Option(help="where each rate search starts, requests/s")] = 1.0,
    search_max: Annotated[float, typer.Option(help="the highest rate a search tries")] = 64.0,
    search_resolution: Annotated[str, typer.Option(help="when a search stops: requests/s or a share (10%)")] = "10%",
    duration_s: Annotated[float, typer.Option(help="each trial's schedule, seconds")] = 15.0,
    input_tokens: Annotated[str, typer.Option(help="as `run load --input-tokens`")] = "128",
    output_tokens: Annotated[str, typer.Option(help="as `run load --output-tokens`")] = "32",
    seed: Annotated[int, typer.Option(help="the schedule's and lengths' seed")] = 731,
    max_real: Annotated[int, typer.Option(help="budget: points measured for real")] = 2,
    max_time_s: Annotated[
        float | None,
        typer.Option(help="budget: no real run starts after this many seconds (counting the longest run so far)"),
    ] = None,
    port: Annotated[int, typer.Option(help="the port each point's engine serves on")] = 8191,
    tokenizer: Annotated[
        Path | None, typer.Option(help="the tokenizer for exact-length prompts (default: the engine's /tokenize)")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="the tune's folder; the same options resume it")] = Path(
        "tune"
    ),
) -> None:
    """Predict every grid point on the simulator, measure the promising ones for real, print the Pareto table."""
    if not profile_path.is_file():
        raise UsageError(f"profile not found: {profile_path}")
    if is_sim_profile(profile_path):
        raise UsageError(
            f"{profile_path} is a sim profile: tune varies a deployment profile (give the sim profile as --sim)"
        )
    if not sim.is_file() or not is_sim_profile(sim):
        raise UsageError(f"--sim {sim}: not a sim profile (write one with `loadproof sim calibrate`)")
    options = from_cli(
        TuneOptions,
        {
            "slo": slo,
            "attainment": attainment,
            "rate": rate,
            "search_max": search_max,
            "search_resolution": search_resolution,
            "duration_s": duration_s,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "seed": seed,
            "max_real": max_real,
            "max_time_s": max_time_s,
            "port": port,
            "tokenizer": tokenizer,
            "out": out,
        },
        "tune",
    ).model_copy(update={"grid": grid})  # each --grid whole: its values hold commas
    done = run_tune(profile_path, load_profile(profile_path), sim, load_sim_config(sim), options, _say)
    ui.table("Tune: highest rate meeting the SLO, predicted and measured", TABLE_HEAD, table_rows(done))
    _say(f"tune.md, tune.json and pareto.svg in {done.folder}")
