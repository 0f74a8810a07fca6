"""`loadproof plan PROFILE`: the KV cache a profile should hold in theory, beside what the engine
reported; with --simulate, the simulator's prediction of a scenario on it (`sim.predict`), in process."""

from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.run import parameter
from loadproof.cli.sim import ContractRequest, predict_load, predict_replay, show_capacity, show_capacity_ranges
from loadproof.config.profile import Profile, load_profile
from loadproof.engines import read_startup_log
from loadproof.errors import UsageError
from loadproof.planner.profile_plan import ProfilePlan, model_config_path, plan_profile
from loadproof.sim.config import is_sim_profile, load_sim_config
from loadproof.sim.contract import DEFAULT_TOLERANCE_PCT
from loadproof.sim.predict import (
    SIMULATED,
    capacity_options,
    check_applies,
    deployment_config,
    load_cli_options,
    predict_capacity_run,
    replay_cli_options,
)


def plan(
    ctx: typer.Context,
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="profile TOML")],
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
        typer.Option(
            help="predict a scenario on the simulator: capacity, prefill, "
            "load (the options of `sim predict-load`) or replay (those of "
            "`sim predict-replay`)"
        ),
    ] = None,
    sim: Annotated[
        Path | None,
        typer.Option("--sim", help="calibrated sim profile giving the step costs (`loadproof sim calibrate`)"),
    ] = None,
    sessions: Annotated[int, typer.Option(help="N for --simulate capacity")] = 4,
    window_s: Annotated[float, typer.Option(help="W for --simulate capacity")] = 60.0,
    ranges: Annotated[
        bool,
        typer.Option(
            help="--simulate capacity, or load at one rate: the range each figure "
            "has over the profile's open assumptions, and what drives it"
        ),
    ] = True,
    prediction_out: Annotated[
        Path | None,
        typer.Option(
            help="write the prediction as a contract that `run capacity|load --prediction FILE` is judged against"
        ),
    ] = None,
    tolerance: Annotated[
        float, typer.Option(help="the contract's tolerance on each figure, percent")
    ] = DEFAULT_TOLERANCE_PCT,
    **values: Any,
) -> None:
    """KV cache capacity of a profile, in theory, beside what the engine reported; with --simulate, the
    simulator's prediction of a scenario on it. PROFILE may also be a sim profile."""
    if not profile_path.is_file():  # before any advice about what else to give
        raise UsageError(f"profile not found: {profile_path}")
    if simulate is not None and simulate not in SIMULATED:
        raise UsageError(f"--simulate {simulate!r}: the simulator predicts {', '.join(SIMULATED)}")
    # given on the command line (typer carries its own click: its ParameterSource, compared by name)
    check_applies(simulate, {k for k in values if getattr(ctx.get_parameter_source(k), "name", "") == "COMMANDLINE"})
    if is_sim_profile(profile_path):
        if simulate is None:
            raise UsageError(f"{profile_path} is a sim profile: give --simulate capacity|prefill|load|replay")
        config = load_sim_config(profile_path)
    else:
        if simulate is not None and sim is None:
            raise UsageError("--simulate needs the step costs: give --sim SIM_PROFILE (from `loadproof sim calibrate`)")
        profile = load_profile(profile_path)
        log_text = read_startup_log(startup_log) if startup_log is not None else None
        planned = plan_profile(profile, model_config_path(profile, model_config), log_text)
        if simulate not in ("load", "replay"):  # an open-loop prediction prints its own figures only
            show_plan(profile, planned, input_tokens, growth_tokens)
        if simulate is None or sim is None:
            return
        config = deployment_config(profile, planned, load_sim_config(sim))
    if prediction_out is not None and simulate not in ("capacity", "load"):
        raise UsageError("--prediction-out: a contract is written for --simulate capacity or load")
    if not 0 < tolerance < 1000:
        raise UsageError(f"--tolerance {tolerance:g}: a percentage above 0")
    contract_of = ContractRequest(prediction_out, tolerance, sim if sim is not None else profile_path)
    if simulate == "load":
        lengths = None if input_tokens is None else str(input_tokens)
        predict_load(
            config,
            {**values, "input_tokens": lengths},
            "plan --simulate load",
            contract_of if (ranges or prediction_out) else None,
        )
    elif simulate == "replay":
        predict_replay(config, values, "plan --simulate replay")
    else:
        options = capacity_options(sessions, input_tokens or 1024, window_s, f"plan --simulate {simulate}")
        show_capacity(predict_capacity_run(config, simulate, options), config)
        if simulate == "capacity" and (ranges or prediction_out):
            show_capacity_ranges(config, options, contract_of)


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
    """`--simulate load|replay`'s options, as `sim predict-load|predict-replay` take them (plan's own
    `--input-tokens` stands for load's), none required: each prediction checks its own."""
    own = set(inspect.signature(plan).parameters)
    seen: dict[str, inspect.Parameter] = {}
    for panel, options in (("--simulate load", load_cli_options()), ("--simulate replay", replay_cli_options())):
        for option in options:
            if option.field not in own and option.field not in seen:
                seen[option.field] = parameter(replace(option, required=False), panel)
    return list(seen.values())


# typer reads the signature as given: plan's own parameters with their annotations evaluated, then the generated
_fixed = [
    p for p in inspect.signature(plan, eval_str=True).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD
]
plan.__signature__ = inspect.Signature(_fixed + _simulated_options())  # type: ignore[attr-defined]
app.command()(plan)
