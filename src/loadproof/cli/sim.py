"""`loadproof sim` (the simulator as a server), `loadproof sim calibrate`, and the prediction that
`loadproof plan --simulate` prints."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from loadproof.cli import app, ui
from loadproof.errors import UsageError
from loadproof.sim.config import FaultConfig, SimConfig

sim_app = typer.Typer(help="loadproof's engine simulator: failure cases on demand, what-if capacity.",
                      invoke_without_command=True, no_args_is_help=False)
app.add_typer(sim_app, name="sim")


@sim_app.callback(invoke_without_command=True)
def sim(
    ctx: typer.Context,
    config: Annotated[Optional[Path], typer.Option("--config", help="sim profile TOML/JSON (see `sim calibrate`)")] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8100,
    time_scale: Annotated[Optional[float], typer.Option(help="modeled seconds per wall second")] = None,
    fault: Annotated[Optional[list[str]], typer.Option(help="fault active from start (repeatable): crash, hang, slow, "
                                                       "error_event, http_500, http_503, refuse, wrong_answer, drop")] = None,
    served_model_name: Annotated[Optional[str], typer.Option(help="model name it serves (default: the sim "
                                                             "profile's)")] = None,
    max_model_len: Annotated[Optional[int], typer.Option(help="context window (default: the sim profile's)")] = None,
    api_key: Annotated[Optional[str], typer.Option(help="require this key on /v1, as vLLM's --api-key")] = None,
) -> None:
    """Serve the simulator (OpenAI-compatible, vLLM's /metrics, fault control at /sim/faults)."""
    if ctx.invoked_subcommand is not None:
        return
    from loadproof.sim.config import load_sim_config
    from loadproof.sim.run import serve

    cfg = load_sim_config(config)
    updates: dict[str, object] = {}
    if time_scale is not None:
        if time_scale <= 0:
            raise UsageError("--time-scale must be > 0")
        updates["time_scale"] = time_scale
    if served_model_name is not None:
        updates["model"] = served_model_name
    if max_model_len is not None:
        if max_model_len < 16:
            raise UsageError("--max-model-len must be >= 16")
        updates["max_model_len"] = max_model_len
    if fault:
        try:
            updates["faults"] = FaultConfig.model_validate({**cfg.faults.model_dump(), "active": list(fault)})
        except Exception:
            raise UsageError(f"unknown fault in {', '.join(fault)}; known: crash, hang, slow, error_event, http_500, "
                             "http_503, refuse, wrong_answer, drop") from None
    serve(cfg.model_copy(update=updates), host, port, api_key=api_key)


@sim_app.command("calibrate")
def calibrate_cmd(
    runs: Annotated[Optional[list[Path]], typer.Argument(metavar="RUN_DIR...", help="prefill and throughput runs")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="sim profile to write (TOML)")] = Path("sim-profile.toml"),
    ttft: Annotated[Optional[list[str]], typer.Option(help="INPUT_TOKENS:SECONDS, a cold single-request TTFT")] = None,
    decode: Annotated[Optional[list[str]], typer.Option(help="BATCH:CONTEXT:TOKENS_PER_S, a per-stream decode rate")] = None,
    kv_tokens: Annotated[Optional[int], typer.Option(help="KV cache tokens (default: the runs' engine startup report)")] = None,
    block_size: Annotated[Optional[int], typer.Option(help="KV block size (default: the engine's)")] = None,
    max_num_seqs: Annotated[Optional[int], typer.Option(help="default: the runs' profile, else 256")] = None,
    max_num_batched_tokens: Annotated[Optional[int], typer.Option(help="per-step token budget (default: the engine's)")] = None,
    max_model_len: Annotated[Optional[int], typer.Option(help="default: the runs' profile")] = None,
    decode_context_share: Annotated[Optional[float], typer.Option(help="with one decode point: the share of a decode "
                                                                  "step that grows with context (default 0.5)")] = None,
    model: Annotated[str, typer.Option(help="model name the simulator serves")] = "sim",
) -> None:
    """Fit the simulator's step cost to measured single-request runs (or published figures)."""
    from loadproof.engines import engines
    from loadproof.sim.calibrate import calibrate, parse_decode, parse_ttft, points_from_runs
    from loadproof.sim.config import dump_sim_config

    ttft_points, decode_points, facts = points_from_runs(list(runs or []))
    ttft_points += [parse_ttft(t) for t in ttft or []]
    decode_points += [parse_decode(d) for d in decode or []]
    adapter = engines.get(facts["engine"]) if facts.get("engine") in engines.names() else None
    block = block_size or facts.get("block_size") or (adapter.default_block_size if adapter else 16)
    tokens = kv_tokens or facts.get("kv_cache_tokens")
    if not tokens:
        raise UsageError("the KV cache size is unknown: give --kv-tokens (no run holds an engine startup report)")
    length = max_model_len or facts.get("max_model_len")
    if not length:
        raise UsageError("the context length is unknown: give --max-model-len")
    if decode_context_share is not None and not 0 <= decode_context_share <= 1:
        raise UsageError("--decode-context-share must be between 0 and 1")
    base = SimConfig(model=model, max_model_len=length, block_size=block, num_gpu_blocks=max(1, tokens // block),
                     max_num_seqs=max_num_seqs or facts.get("max_num_seqs") or 256,
                     max_num_batched_tokens=(max_num_batched_tokens or facts.get("max_num_batched_tokens")
                                             or (adapter.default_max_num_batched_tokens if adapter else 8192)))
    cal = calibrate(ttft_points, decode_points, base, decode_context_share=decode_context_share)
    out.write_text(dump_sim_config(cal.config), encoding="utf-8")
    c = cal.config.cost
    ui.table(f"Sim profile {out}", ["parameter", "value"], [
        ["KV cache", f"{cal.config.kv_cache_tokens:,} tokens ({cal.config.num_gpu_blocks:,} x {block})"],
        ["max_num_seqs / budget", f"{cal.config.max_num_seqs} / {cal.config.max_num_batched_tokens} tokens per step"],
        ["step overhead", f"{c.step_overhead_s * 1e3:.3f} ms"],
        ["prefill", f"{c.prefill_s_per_token * 1e6:.3f} us/token + {c.prefill_s_per_token_ctx * 1e12:.4f} ps/token/ctx"],
        ["decode", f"{c.decode_s_per_seq * 1e3:.4f} ms/seq + {c.decode_s_per_ctx_token * 1e9:.4f} ns/ctx token"],
        ["request overhead", f"{c.request_overhead_s * 1e3:.1f} ms"],
    ])
    for line in cal.residuals:
        ui.out.print(line, markup=False, highlight=False)
    for line in cal.assumptions:
        ui.out.print(f"assumed: {line}", markup=False, highlight=False)


def simulate_and_print(cfg: SimConfig, scenario: str, sessions: int, input_tokens: int, window_s: float) -> int:
    """Run a scenario on the virtual clock and print the predicted figures; returns the exit code."""
    from loadproof.metrics.capacity import evaluate_capacity
    from loadproof.sim.virtual import predict_capacity

    if scenario not in ("capacity", "prefill"):
        raise UsageError(f"--simulate {scenario!r}: the simulator predicts capacity or prefill")
    if input_tokens >= cfg.max_model_len:
        raise UsageError(f"--input-tokens {input_tokens:,} does not fit max_model_len {cfg.max_model_len:,}")
    n = 1 if scenario == "prefill" else sessions
    started = time.perf_counter()
    pred = predict_capacity(cfg, n, input_tokens, window_s)
    result = evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events)
    wall = time.perf_counter() - started
    by_name = {c.name: c for c in result.claims}
    title = (f"Predicted: {n} session(s) x {input_tokens:,} tokens sent together, window {window_s:g} s "
             f"(simulated {pred.modeled_s:,.1f} s in {pred.num_steps:,} steps, {wall:.2f} s wall)")
    rows = [[name.split(".", 1)[1], by_name[name].printed, by_name[name].unit] for name in (
        "capacity.cold_ttft_median_s", "capacity.cold_ttft_max_s", "capacity.window_aggregate_tokens_per_s",
        "capacity.window_per_stream_min_tokens_per_s", "capacity.window_per_stream_max_tokens_per_s") if name in by_name]
    if scenario == "capacity":
        rows.append(["acceptance (predicted)", result.verdict, result.reason])
    ui.table(title, ["figure", "value", "unit"], rows)
    ui.out.print(f"model: {cfg.source}", markup=False, highlight=False)
    return 0
