"""`loadproof sim` (the simulator as a server), `loadproof sim calibrate`, and `sim predict-NAME` for each
scenario whose predictor has a command (the catalog's `predict`; `plan --simulate NAME` predicts every one):
each parses its options, calls one function below the command line (`sim.run`, `predict.calibration`,
`predict.whatif`) and prints what it returns."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.cli.common import console
from loadproof.cli.run import parameter
from loadproof.errors import UsageError
from loadproof.predict.base import Predictor, predictors
from loadproof.predict.calibrate import Calibration
from loadproof.predict.calibration import CalibrationLimits, FitShares, calibrate_from_published, calibrate_from_runs
from loadproof.predict.grid import grid as grid_spec
from loadproof.predict.grid import measure_grid
from loadproof.predict.whatif import predict_named
from loadproof.results.auto import storing
from loadproof.sim.config import FaultConfig, load_sim_config, sim_profile_path
from loadproof.sim.run import fleet_ports, serve

sim_app = typer.Typer(
    help="loadproof's engine simulator: failure cases on demand, what-if capacity.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(sim_app, name="sim")


@sim_app.callback(invoke_without_command=True)
def sim(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="sim profile TOML/JSON (see `sim calibrate`), or a packaged simulator profile's name"
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8100,
    time_scale: Annotated[float | None, typer.Option(help="modeled seconds per wall second")] = None,
    fault: Annotated[
        list[str] | None,
        typer.Option(
            help="fault active from start (repeatable): crash, hang, slow, "
            "error_event, http_500, http_503, refuse, wrong_answer, drop"
        ),
    ] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="model name it serves (default: the sim profile's)")
    ] = None,
    max_model_len: Annotated[int | None, typer.Option(help="context window (default: the sim profile's)")] = None,
    api_key: Annotated[str | None, typer.Option(help="require this key on /v1, as vLLM's --api-key")] = None,
    reasoning_share: Annotated[
        float | None,
        typer.Option(
            help="a reasoning model: the share of a chat request's "
            "output streamed as reasoning first, when it asks "
            "for thinking (0 <= share < 1)"
        ),
    ] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="as vLLM's (default: the sim profile's)")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(help="as vLLM's (default: the sim profile's)")] = None,
    long_prefill_token_threshold: Annotated[
        int | None, typer.Option(help="as vLLM's, 0: no cap (default: the sim profile's)")
    ] = None,
    replicas: Annotated[
        int, typer.Option(help="serve a fleet: N simulated engines behind a modelled router on --port")
    ] = 1,
    router_policy: Annotated[
        str | None,
        typer.Option(
            help="the fleet's router policy, modelled on vllm-router's: random, round_robin, cache_aware, "
            "kv_aware, power_of_two, consistent_hash or sticky_least_loaded (default: round_robin)"
        ),
    ] = None,
    replica_ports: Annotated[
        str | None, typer.Option(help="each replica's port, comma-separated (default: the ports after --port)")
    ] = None,
    router_metrics_port: Annotated[
        int | None, typer.Option(help="the router's Prometheus metrics port (default: after the replicas')")
    ] = None,
) -> None:
    """Serve the simulator (OpenAI-compatible, vLLM's /metrics, fault control at /sim/faults)."""
    if ctx.invoked_subcommand is not None:
        return
    cfg = load_sim_config(sim_profile_path(config, "--config") if config is not None else None)
    updates: dict[str, object] = {}
    if time_scale is not None:
        if time_scale <= 0:
            raise UsageError("--time-scale must be > 0")
        updates["time_scale"] = time_scale
    if served_model_name is not None:
        updates["model"] = served_model_name
    if reasoning_share is not None:
        if not 0 <= reasoning_share < 1:
            raise UsageError("--reasoning-share must be >= 0 and < 1")
        updates["reasoning_share"] = reasoning_share
    if max_model_len is not None:
        if max_model_len < 16:
            raise UsageError("--max-model-len must be >= 16")
        updates["max_model_len"] = max_model_len
    for flag, value, least in (
        ("max_num_seqs", max_num_seqs, 1),
        ("max_num_batched_tokens", max_num_batched_tokens, 1),
        ("long_prefill_token_threshold", long_prefill_token_threshold, 0),
    ):
        if value is not None:
            if value < least:
                raise UsageError(f"--{flag.replace('_', '-')} must be >= {least}")
            updates[flag] = value
    if fault:
        try:
            updates["faults"] = FaultConfig.model_validate({**cfg.faults.model_dump(), "active": list(fault)})
        except Exception:
            raise UsageError(
                f"unknown fault in {', '.join(fault)}; known: crash, hang, slow, error_event, http_500, "
                "http_503, refuse, wrong_answer, drop"
            ) from None
    fleet = fleet_ports(replicas, router_policy, port, replica_ports, router_metrics_port)
    serve(cfg.model_copy(update=updates), host, port, api_key=api_key, fleet=fleet)


@sim_app.command("calibrate")
def calibrate_cmd(
    runs: Annotated[
        list[Path] | None, typer.Argument(metavar="RUN_DIR...", help="prefill, throughput and capacity runs")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="sim profile to write (TOML)")] = Path("sim-profile.toml"),
    ttft: Annotated[list[str] | None, typer.Option(help="INPUT_TOKENS:SECONDS, a cold single-request TTFT")] = None,
    decode: Annotated[
        list[str] | None, typer.Option(help="BATCH:CONTEXT:TOKENS_PER_S, a per-stream decode rate")
    ] = None,
    kv_tokens: Annotated[
        int | None, typer.Option(help="KV cache tokens (default: the runs' engine startup report)")
    ] = None,
    block_size: Annotated[int | None, typer.Option(help="KV block size (default: the engine's)")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="default: the runs' profile, else 256")] = None,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option(help="per-step token budget (default: the engine's)")
    ] = None,
    max_model_len: Annotated[int | None, typer.Option(help="default: the runs' profile")] = None,
    decode_context_share: Annotated[
        float | None,
        typer.Option(help="with one decode point: the share of a decode step that grows with context (default 0.5)"),
    ] = None,
    model: Annotated[str, typer.Option(help="model name the simulator serves")] = "sim",
    published: Annotated[Path | None, typer.Option(help="a published-figures TOML file (docs/simulator.md)")] = None,
    acceptance: Annotated[float | None, typer.Option(help="speculative acceptance rate (default: fitted)")] = None,
    spec_from: Annotated[
        Path | None,
        typer.Option(
            help="a throughput run with drafts (and its --profile): the "
            "draft schedule and acceptance by position it measured, "
            "applied to a fit from runs without drafts"
        ),
    ] = None,
    prefill_attention_share: Annotated[
        float | None,
        typer.Option(
            help="with one prompt length: the share of prefill that is attention (default 0.5 with --published)"
        ),
    ] = None,
    frontend_s_per_token: Annotated[
        float | None,
        typer.Option(
            help="request overhead per prompt token that overlaps other prefills (default: from capacity runs, else 0; "
            "with --published 3.2e-6)"
        ),
    ] = None,
    pipeline_stages: Annotated[
        int | None, typer.Option(help="pipeline-parallel stages (default: the runs' profile, else 1)")
    ] = None,
    cuda_graph_max: Annotated[
        int | None,
        typer.Option(help="largest CUDA-graph batch (default: the runs' profile; none: decode steps not padded)"),
    ] = None,
    grid: Annotated[
        bool,
        typer.Option(
            "--grid",
            help="measure a grid on a real engine first (--url, --tokenizer): "
            "a capacity run at each concurrency x context",
        ),
    ] = False,
    url: Annotated[str | None, typer.Option(help="with --grid: the engine's base URL")] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="with --grid: the engine's tokenizer (exact-length prompts)")
    ] = None,
    concurrency: Annotated[str, typer.Option(help="with --grid: sessions per run")] = "1,4,8",
    context: Annotated[str, typer.Option(help="with --grid: prompt tokens per session")] = "1024,4096",
    window_s: Annotated[float, typer.Option(help="with --grid: each run's shared-generation window")] = 10.0,
    runs_out: Annotated[Path, typer.Option(help="with --grid: where the grid's run directories go")] = Path("runs"),
    grid_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--grid-arg",
            help="with --grid: one more argument for every `run capacity` (e.g. --grid-arg=--profile=P.toml)",
        ),
    ] = None,
) -> None:
    """Fit the simulator's step cost to measured runs (prefill, throughput, capacity) or published figures."""
    limits = CalibrationLimits(
        kv_tokens=kv_tokens,
        block_size=block_size,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len,
        pipeline_stages=pipeline_stages,
        cuda_graph_max=cuda_graph_max,
        model=model,
    )
    shares = FitShares(
        acceptance=acceptance,
        prefill_attention_share=prefill_attention_share,
        decode_context_share=decode_context_share,
        frontend_s_per_token=frontend_s_per_token,
    )
    if published is not None:
        if runs or ttft or decode or spec_from:
            raise UsageError(
                "--published calibrates from the file alone: leave out run directories, --ttft, --decode, --spec-from"
            )
        done = calibrate_from_published(published, out, limits, shares)
    else:
        measured = list(runs or [])
        if grid:
            spec = grid_spec(url, tokenizer, concurrency, context, window_s, runs_out, grid_arg or [])
            with storing(runs_out, _say):  # LOADPROOF_STORE_AUTO=1: the grid's runs, added to the store
                measured += measure_grid(spec, console)
        elif url or tokenizer:
            raise UsageError("--url and --tokenizer go with --grid")
        done = calibrate_from_runs(measured, ttft or [], decode or [], out, limits, shares, spec_from)
    for note in done.notes:
        _say(note)
    _print_calibration(done.calibration, done.path)


def _say(line: str) -> None:
    ui.out.print(line, markup=False, highlight=False)


def _print_calibration(cal: Calibration, out: Path) -> None:
    c = cal.config.cost
    block = cal.config.block_size
    ui.table(
        f"Sim profile {out}",
        ["parameter", "value"],
        [
            ["KV cache", f"{cal.config.kv_cache_tokens:,} tokens ({cal.config.num_gpu_blocks:,} x {block})"],
            [
                "max_num_seqs / budget",
                f"{cal.config.max_num_seqs} / {cal.config.max_num_batched_tokens} tokens per step",
            ],
            ["step overhead", f"{c.step_overhead_s * 1e3:.3f} ms"],
            [
                "prefill cost",
                f"{c.prefill_s_per_token * 1e6:.3f} us/token + {c.prefill_s_per_token_ctx * 1e12:.4f} ps/token/ctx",
            ],
            [
                "decode cost",
                f"{c.decode_s_per_seq * 1e3:.4f} ms/query token + {c.decode_s_per_ctx_token * 1e9:.4f} ns/ctx token"
                f" + {c.decode_s_per_ctx_token_max * 1e9:.4f} ns x longest ctx"
                + (
                    f"; at least {c.decode_kv_floor_s_per_token * 1e12:.1f} ps/resident token"
                    if c.decode_kv_floor_s_per_token
                    else ""
                ),
            ],
            [
                "speculative",
                (
                    ", ".join(f"batch <= {b}: {k} drafts" for b, k in c.spec_draft_by_batch)
                    + (
                        f"; accepted by position {', '.join(f'{100 * p:.1f}' for p in c.spec_accepted_by_pos)}%, "
                        f"{100 * c.spec_drafted_share:.1f}% of steps drafted"
                        if c.spec_accepted_by_pos
                        else f"; acceptance {c.spec_acceptance:.3f}"
                    )
                )
                if c.spec_draft_by_batch
                else "none",
            ],
            ["pipeline", f"{c.pipeline_stages} stage(s)"],
            ["CUDA graphs", f"up to batch {max(c.cuda_graph_sizes)}" if c.cuda_graph_sizes else "not modeled"],
            [
                "request overhead",
                f"{c.request_overhead_s * 1e3:.1f} ms + {c.request_overhead_s_per_token * 1e6:.3f} us/token",
            ],
        ],
    )
    for line in cal.used:
        _say(f"used: {line}")
    for line in cal.residuals:
        _say(line)
    for line in cal.assumptions:
        _say(f"assumed: {line}")


class ConsoleShow:
    """Where a prediction goes (`predict.base.Show`): tables and result lines on stdout, progress on stderr."""

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        ui.table(title, header, rows)

    def line(self, text: str) -> None:
        _say(text)

    def progress(self, text: str) -> None:
        ui.err.print(text, markup=False, highlight=False)


show = ConsoleShow()
PROFILE_PARAMETER = inspect.Parameter(
    "profile",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    annotation=Annotated[
        Path,
        typer.Argument(
            metavar="SIM_PROFILE",
            help="a sim profile (`loadproof sim calibrate`), or a packaged simulator profile's name",
        ),
    ],
)


def _predict_command(simulate: str, predictor: Predictor[Any]) -> None:
    """`sim predict-NAME SIM_PROFILE [options]`: the options generated from the scenario's model."""

    def command(profile: Path, **values: Any) -> None:
        predict_named(profile, simulate, values, show)

    options = [PROFILE_PARAMETER, *(parameter(o) for o in predictor.cli_options())]
    command.__signature__ = inspect.Signature(options)  # type: ignore[attr-defined]  # typer reads the signature
    command.__name__ = f"predict_{simulate}".replace("-", "_")
    command.__doc__ = predictor.command
    sim_app.command(f"predict-{simulate}")(command)


for _name in predictors.in_order():  # every scenario whose predictor has a command of its own (the catalog's)
    if predictors.get(_name).command is not None:
        _predict_command(_name, predictors.get(_name))
