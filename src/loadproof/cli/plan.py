"""`loadproof plan PROFILE`: the KV cache a profile should hold in theory, beside what the engine
reported; with --simulate NAME, the simulator's prediction of a scenario on it, in process
(`predict.whatif`: every scenario with a predictor in the catalog, its options generated from its model)."""

from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.run import parameter
from loadproof.cli.sim import show
from loadproof.config.profile import Profile
from loadproof.planner.profile_plan import ProfilePlan
from loadproof.predict.base import contracts, listing, predictors
from loadproof.predict.contract import DEFAULT_TOLERANCE_PCT
from loadproof.predict.whatif import WhatIf, plan_of, predict


def plan(
    ctx: typer.Context,
    profile_path: Annotated[
        Path,
        typer.Argument(
            metavar="PROFILE",
            help="profile TOML or sim profile, or a packaged profile's name (`loadproof profiles`)",
        ),
    ],
    startup_log: Annotated[
        Path | None,
        typer.Option(
            help="the engine's startup log: plan from the memory it found, and compare with the tokens it reported"
        ),
    ] = None,
    input_tokens: Annotated[
        int | None, typer.Option("--input-tokens", "-l", help="L: how many sessions of L fit")
    ] = None,
    growth_tokens: Annotated[int, typer.Option(help="tokens each session generates while held (with -l)")] = 0,
    model_config: Annotated[
        Path | None, typer.Option(help="the model's config.json (default: the profile's model folder)")
    ] = None,
    simulate: Annotated[
        str | None,
        typer.Option(help=f"predict a scenario on the simulator: {listing(predictors.names(), ' or ')}"),
    ] = None,
    sim: Annotated[
        Path | None,
        typer.Option(
            "--sim",
            help="calibrated sim profile giving the step costs (`loadproof sim calibrate`), or a packaged "
            "simulator profile's name",
        ),
    ] = None,
    ranges: Annotated[
        bool,
        typer.Option(
            help="with a contract's figures (--simulate "
            f"{listing(contracts.names(), ' or ')}): the range each figure has over the profile's open "
            "assumptions, and what drives it"
        ),
    ] = True,
    prediction_out: Annotated[
        Path | None,
        typer.Option(help="write the prediction as a contract that `run NAME --prediction FILE` is judged against"),
    ] = None,
    tolerance: Annotated[
        float, typer.Option(help="the contract's tolerance on each figure, percent")
    ] = DEFAULT_TOLERANCE_PCT,
    **values: Any,
) -> None:
    """KV cache capacity of a profile, in theory, beside what the engine reported; with --simulate, the
    simulator's prediction of a scenario on it. PROFILE may also be a sim profile, or a packaged profile's name."""
    # given on the command line (typer carries its own click: its ParameterSource, compared by name)
    given = {k: v for k, v in values.items() if getattr(ctx.get_parameter_source(k), "name", "") == "COMMANDLINE"}
    what = None
    if simulate is not None:
        what = WhatIf(simulate, f"plan --simulate {simulate}", ranges, prediction_out, tolerance)
    planned = plan_of(profile_path, what, given, sim=sim, startup_log=startup_log, model_config=model_config)
    if planned.profile is not None and planned.plan is not None and planned.shows_plan:
        show_plan(planned.profile, planned.plan, input_tokens, growth_tokens)
    if planned.what is not None and planned.config is not None:
        predict(planned.config, planned.what, {**given, "input_tokens": input_tokens}, show)


def show_plan(profile: Profile, planned: ProfilePlan, input_tokens: int | None, growth_tokens: int) -> None:
    dep, kv = planned.deployment, planned.plan
    ui.table(
        f"KV cache plan for {profile.name} (theory; a capacity run measures)",
        ["stage", "layers", "groups", "block bytes", "blocks", "blocks per request"],
        [
            [
                str(s.stage),
                str(s.layers),
                str(len(s.groups)),
                f"{s.block_bytes:,}",
                f"{s.num_blocks:,}",
                f"{s.blocks_per_request:,}",
            ]
            for s in kv.stages
        ],
    )
    rows = [
        ["KV budget per GPU", planned.budget_source],
        ["parallelism", f"TP {dep.tensor_parallel} x PP {dep.pipeline_parallel}"],
        ["block size", f"{dep.block_size} tokens ({planned.block_source})"],
        ["KV bytes per token per GPU", f"{kv.bytes_per_token_per_gpu:,.0f}"],
        ["predicted KV cache tokens", f"{kv.kv_cache_tokens:,}"],
        [f"max concurrency at {dep.max_model_len:,} tokens", f"{kv.max_concurrency:.2f}x"],
        ["theoretical full windows", f"{kv.theoretical_full_windows:.2f} (theory, not capacity)"],
    ]
    offload = profile.kv_cache.offload_gib
    if offload is not None:
        rows.append(
            [
                f"CPU tier ({offload:g} GiB, {profile.kv_cache.offload_backend})",
                f"{kv.cpu_tier_tokens(offload, dep.tensor_parallel):,} tokens beside the GPU's (theory)",
            ]
        )
    if input_tokens:
        grown = f" + {growth_tokens:,} generated" if growth_tokens else ""
        rows.append(
            [
                f"sessions of {input_tokens:,}{grown} tokens that fit",
                f"{kv.sessions_fitting(input_tokens, dep.block_size, growth_tokens):,} (theory)",
            ]
        )
    if planned.reported is not None and planned.reported.kv_cache_tokens:
        rows.append(["engine reported", f"{planned.reported.kv_cache_tokens:,} tokens"])
        rows.append(["prediction error", f"{planned.error_pct:+.2f}%"])
    ui.table("Plan", ["", "value"], rows)
    for warning in planned.warnings:
        ui.err.print(f"warning: {warning}", markup=False)


def _simulated_options() -> list[inspect.Parameter]:
    """Each prediction's options (`--simulate NAME`), as its predictor takes them from the scenario's model
    (`plan`'s own `--input-tokens` stands for theirs), none required: each prediction checks its own; an
    option two predictions share is listed once."""
    own = set(inspect.signature(plan).parameters)
    seen: dict[str, inspect.Parameter] = {}
    flags: dict[str, str] = {}
    for name in predictors.in_order():
        for option in predictors.get(name).cli_options():
            if option.field in own or option.field in seen:
                continue
            clash = [f for f in option.flags if flags.get(f, option.field) != option.field]
            if clash:  # a programming error, caught by the unit tests
                raise TypeError(f"--simulate {name}: {', '.join(clash)} is another prediction's option's flag")
            flags.update({f: option.field for f in option.flags})
            seen[option.field] = parameter(replace(option, required=False), f"--simulate {name}")
    return list(seen.values())


# typer reads the signature as given: plan's own parameters with their annotations evaluated, then the generated
_fixed = [
    p for p in inspect.signature(plan, eval_str=True).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD
]
plan.__signature__ = inspect.Signature(_fixed + _simulated_options())  # type: ignore[attr-defined]  # typer reads the signature
app.command()(plan)
