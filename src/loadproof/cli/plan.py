"""`loadproof plan PROFILE`: the KV cache a profile should hold in theory, beside what the engine
reported; with --simulate, the simulator's prediction of a scenario on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from loadproof.cli import app, ui
from loadproof.config.profile import load_profile
from loadproof.errors import UsageError


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def plan(
    ctx: typer.Context,
    profile_path: Annotated[Path, typer.Argument(metavar="PROFILE", help="profile TOML")],
    startup_log: Annotated[Optional[Path], typer.Option(help="the engine's startup log: plan from the memory it "
                                                          "found, and compare with the tokens it reported")] = None,
    input_tokens: Annotated[Optional[int], typer.Option("--input-tokens", "-l", help="L: how many sessions of L fit")] = None,
    growth_tokens: Annotated[int, typer.Option(help="tokens each session generates while held (with -l)")] = 0,
    model_config: Annotated[Optional[Path], typer.Option(help="the model's config.json (default: the profile's model folder)")] = None,
    simulate: Annotated[Optional[str], typer.Option(help="predict a scenario on the simulator: capacity, prefill, "
                                                    "load (the options of `sim predict-load`) or replay (those of "
                                                    "`sim predict-replay`)")] = None,
    sim: Annotated[Optional[Path], typer.Option("--sim", help="calibrated sim profile giving the step costs "
                                                "(`loadproof sim calibrate`)")] = None,
    sessions: Annotated[int, typer.Option(help="N for --simulate capacity")] = 4,
    window_s: Annotated[float, typer.Option(help="W for --simulate capacity")] = 60.0,
) -> None:
    """KV cache capacity of a profile, in theory, beside what the engine reported; with --simulate, the
    simulator's prediction of a scenario on it. PROFILE may also be a sim profile."""
    from loadproof.cli.sim import simulate_and_print
    from loadproof.engines import read_startup_log
    from loadproof.planner.profile_plan import model_config_path, plan_profile
    from loadproof.sim.config import is_sim_profile, load_sim_config

    if not profile_path.is_file():  # before any advice about what else to give
        raise UsageError(f"profile not found: {profile_path}")
    if simulate in ("load", "replay"):
        extra = ["--input-tokens", str(input_tokens)] if input_tokens is not None and simulate == "load" else []
        raise typer.Exit(_open_loop(ctx, profile_path, simulate, sim, extra))
    if ctx.args:
        raise UsageError(f"unexpected arguments: {' '.join(ctx.args)}")
    if is_sim_profile(profile_path):
        if simulate is None:
            raise UsageError(f"{profile_path} is a sim profile: give --simulate capacity|prefill|load|replay")
        raise typer.Exit(simulate_and_print(load_sim_config(profile_path), simulate, sessions,
                                            input_tokens or 1024, window_s))
    if simulate is not None and sim is None:
        raise UsageError("--simulate needs the step costs: give --sim SIM_PROFILE (from `loadproof sim calibrate`)")
    profile = load_profile(profile_path)
    log_text = read_startup_log(startup_log) if startup_log is not None else None
    result = plan_profile(profile, model_config_path(profile, model_config), log_text)
    dep, kv = result.deployment, result.plan
    ui.table(f"KV cache plan for {profile.name} (theory; a capacity run measures)",
             ["stage", "layers", "groups", "block bytes", "blocks", "blocks per request"],
             [[str(s.stage), str(s.layers), str(len(s.groups)), f"{s.block_bytes:,}", f"{s.num_blocks:,}",
               f"{s.blocks_per_request:,}"] for s in kv.stages])
    rows = [
        ["KV budget per GPU", result.budget_source],
        ["parallelism", f"TP {dep.tensor_parallel} x PP {dep.pipeline_parallel}"],
        ["block size", f"{dep.block_size} tokens ({result.block_source})"],
        ["KV bytes per token per GPU", f"{kv.bytes_per_token_per_gpu:,.0f}"],
        ["predicted KV cache tokens", f"{kv.kv_cache_tokens:,}"],
        [f"max concurrency at {dep.max_model_len:,} tokens", f"{kv.max_concurrency:.2f}x"],
        ["theoretical full windows", f"{kv.theoretical_full_windows:.2f} (theory, not capacity)"],
    ]
    if input_tokens:
        grown = f" + {growth_tokens:,} generated" if growth_tokens else ""
        rows.append([f"sessions of {input_tokens:,}{grown} tokens that fit",
                     f"{kv.sessions_fitting(input_tokens, dep.block_size, growth_tokens):,} (theory)"])
    if result.reported is not None and result.reported.kv_cache_tokens:
        rows.append(["engine reported", f"{result.reported.kv_cache_tokens:,} tokens"])
        rows.append(["prediction error", f"{result.error_pct:+.2f}%"])
    ui.table("Plan", ["", "value"], rows)
    for warning in result.warnings:
        ui.err.print(f"warning: {warning}", markup=False)
    if simulate is not None and sim is not None:
        kv_tokens = (result.reported.kv_cache_tokens if result.reported is not None and result.reported.kv_cache_tokens
                     else kv.kv_cache_tokens)
        cfg = deployment_sim(profile, dep, kv_tokens, load_sim_config(sim))
        raise typer.Exit(simulate_and_print(cfg, simulate, sessions, input_tokens or 1024, window_s))


def _open_loop(ctx: typer.Context, profile_path: Path, scenario: str, sim: Path | None, extra: list[str]) -> int:
    """`plan SIM --simulate load|replay ...`: `loadproof sim predict-load|predict-replay SIM ...` (the
    remaining options are theirs; `--input-tokens`, an option of plan's own, is passed on, as a number).
    A deployment profile takes its costs from --sim, its KV cache tokens
    and scheduler limits from itself, as for --simulate capacity."""
    import tempfile

    from loadproof.cli.sim import sim_app
    from loadproof.planner.profile_plan import model_config_path, plan_profile
    from loadproof.sim.config import dump_sim_config, is_sim_profile, load_sim_config

    command = "predict-load" if scenario == "load" else "predict-replay"
    target = profile_path
    with tempfile.TemporaryDirectory(prefix="loadproof-plan-") as tmp:
        if not is_sim_profile(profile_path):
            if sim is None:
                raise UsageError("--simulate needs the step costs: give --sim SIM_PROFILE (from `loadproof sim "
                                 "calibrate`)")
            target = Path(tmp) / "sim.toml"
            profile = load_profile(profile_path)
            result = plan_profile(profile, model_config_path(profile, None), None)
            cfg = deployment_sim(profile, result.deployment, result.plan.kv_cache_tokens, load_sim_config(sim))
            target.write_text(dump_sim_config(cfg), encoding="utf-8")
        try:
            typer.main.get_command(sim_app).main([command, str(target), *ctx.args, *extra], prog_name="loadproof sim",
                                                 standalone_mode=False)
        except typer.Exit as exc:
            return exc.exit_code
    return 0


def deployment_sim(profile, deployment, kv_tokens: int, base):
    """The sim profile's costs on a deployment: its context, block size, KV cache tokens and scheduler limits."""
    sched = profile.scheduler
    return base.model_copy(update={
        "max_model_len": deployment.max_model_len, "block_size": deployment.block_size,
        "num_gpu_blocks": max(1, kv_tokens // deployment.block_size),
        "max_num_seqs": sched.max_num_seqs or base.max_num_seqs,
        "max_num_batched_tokens": sched.max_num_batched_tokens or base.max_num_batched_tokens})
