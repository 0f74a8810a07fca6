"""`loadproof sim` (the simulator as a server), `loadproof sim calibrate`, and the prediction that
`loadproof plan --simulate` prints."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from loadproof.cli import app, ui
from loadproof.errors import UsageError
from loadproof.sim.config import CostModel, FaultConfig, SimConfig

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
    runs: Annotated[Optional[list[Path]], typer.Argument(metavar="RUN_DIR...", help="prefill, throughput and capacity runs")] = None,
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
    published: Annotated[Optional[Path], typer.Option(help="a published-figures TOML file (docs/simulator.md)")] = None,
    acceptance: Annotated[Optional[float], typer.Option(help="speculative acceptance rate (default: fitted)")] = None,
    prefill_attention_share: Annotated[Optional[float], typer.Option(
        help="with one prompt length: the share of prefill that is attention (default 0.5 with --published)")] = None,
    frontend_s_per_token: Annotated[Optional[float], typer.Option(
        help="request overhead per prompt token that overlaps other prefills (default: from capacity runs, else 0; "
             "with --published 3.2e-6)")] = None,
    pipeline_stages: Annotated[Optional[int], typer.Option(help="pipeline-parallel stages (default: the runs' profile, else 1)")] = None,
    cuda_graph_max: Annotated[Optional[int], typer.Option(help="largest CUDA-graph batch (default: the runs' profile; "
                                                          "none: decode steps not padded)")] = None,
    grid: Annotated[bool, typer.Option("--grid", help="measure a grid on a real engine first (--url, --tokenizer): "
                                       "a capacity run at each concurrency x context")] = False,
    url: Annotated[Optional[str], typer.Option(help="with --grid: the engine's base URL")] = None,
    tokenizer: Annotated[Optional[str], typer.Option(help="with --grid: the engine's tokenizer (exact-length prompts)")] = None,
    concurrency: Annotated[str, typer.Option(help="with --grid: sessions per run")] = "1,4,8",
    context: Annotated[str, typer.Option(help="with --grid: prompt tokens per session")] = "1024,4096",
    window_s: Annotated[float, typer.Option(help="with --grid: each run's shared-generation window")] = 10.0,
    runs_out: Annotated[Path, typer.Option(help="with --grid: where the grid's run directories go")] = Path("runs"),
    grid_arg: Annotated[Optional[list[str]], typer.Option("--grid-arg", help="with --grid: one more argument for "
                                                          "every `run capacity` (e.g. --grid-arg=--profile=P.toml)")] = None,
) -> None:
    """Fit the simulator's step cost to measured runs (prefill, throughput, capacity) or published figures."""
    from loadproof.engines import engines
    from loadproof.sim.calibrate import calibrate, parse_decode, parse_ttft, points_from_runs
    from loadproof.sim.config import dump_sim_config, default_capture_sizes

    for name, value in (("--acceptance", acceptance), ("--prefill-attention-share", prefill_attention_share)):
        if value is not None and not 0 <= value <= 1:
            raise UsageError(f"{name} must be between 0 and 1")
    if published is not None:
        if runs or ttft or decode:
            raise UsageError("--published calibrates from the file alone: leave out run directories, --ttft, --decode")
        _calibrate_published(published, out, block_size or 16, acceptance, prefill_attention_share,
                             frontend_s_per_token, model)
        return
    if grid:
        runs = list(runs or []) + _measure_grid(url, tokenizer, concurrency, context, window_s, runs_out, grid_arg or [])
    elif url or tokenizer:
        raise UsageError("--url and --tokenizer go with --grid")
    ttft_points, decode_points, facts = points_from_runs(list(runs or []))
    ttft_points += [parse_ttft(t) for t in ttft or []]
    decode_points += [parse_decode(d) for d in decode or []]
    adapter = engines.get(facts["engine"]) if facts.get("engine") in engines.names() else None
    block = block_size or facts.get("block_size") or (adapter.default_block_size if adapter else 16)
    tokens = kv_tokens or facts.get("kv_cache_tokens")
    if not tokens and facts.get("kv_cache_tokens_inferred"):
        tokens = facts["kv_cache_tokens_inferred"]
        ui.out.print(f"assumed: KV cache of {tokens:,} tokens, inferred from the capacity runs' /metrics (prompt "
                     "tokens resident / KV usage); give --kv-tokens to set it", markup=False, highlight=False)
    if not tokens:
        raise UsageError("the KV cache size is unknown: give --kv-tokens (no run holds an engine startup report)")
    length = max_model_len or facts.get("max_model_len")
    if not length:
        raise UsageError("the context length is unknown: give --max-model-len")
    if decode_context_share is not None and not 0 <= decode_context_share <= 1:
        raise UsageError("--decode-context-share must be between 0 and 1")
    if (pipeline_stages is not None and pipeline_stages < 1) or (cuda_graph_max is not None and cuda_graph_max < 1):
        raise UsageError("--pipeline-stages and --cuda-graph-max must be >= 1")
    graphs = cuda_graph_max or facts.get("cuda_graph_max")
    structure = CostModel(pipeline_stages=pipeline_stages or facts.get("pipeline_stages") or 1,
                          cuda_graph_sizes=default_capture_sizes(graphs) if graphs else [])
    base = SimConfig(model=model, max_model_len=length, block_size=block, num_gpu_blocks=max(1, tokens // block),
                     max_num_seqs=max_num_seqs or facts.get("max_num_seqs") or 256,
                     max_num_batched_tokens=(max_num_batched_tokens or facts.get("max_num_batched_tokens")
                                             or (adapter.default_max_num_batched_tokens if adapter else 8192)),
                     cost=structure)
    cal = calibrate(ttft_points, decode_points, base, decode_context_share=decode_context_share,
                    frontend=facts.get("frontend_points"), frontend_s_per_token=frontend_s_per_token,
                    prefill_attention_share=prefill_attention_share)
    out.write_text(dump_sim_config(cal.config), encoding="utf-8")
    _print_calibration(cal, out)


def _measure_grid(url: str | None, tokenizer: str | None, concurrency: str, context: str, window_s: float,
                  out: Path, extra: list[str]) -> list[Path]:
    """A capacity run at each (sessions, prompt tokens): each gives a lone cold TTFT (its first session), the
    overhead a batch overlaps, and the decode rate of N streams at L tokens, so the fit sees batch x context."""
    import subprocess
    import sys

    if not url or not tokenizer:
        raise UsageError("--grid needs --url URL and --tokenizer PATH")
    try:
        sessions = sorted({int(x) for x in concurrency.split(",") if x.strip()})
        lengths = sorted({int(x) for x in context.split(",") if x.strip()})
    except ValueError:
        raise UsageError("--concurrency and --context take comma-separated integers, e.g. 1,4,8") from None
    if not sessions or not lengths or min(sessions) < 1 or min(lengths) < 16:
        raise UsageError("--concurrency needs sessions >= 1 and --context prompts of 16 tokens or more")
    out.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []
    for length in lengths:
        for n in sessions:
            before = set(out.glob("capacity-*"))
            argv = [sys.executable, "-m", "loadproof", "run", "capacity", "--url", url, "--tokenizer", tokenizer,
                    "--sessions", str(n), "--input-tokens", str(length), "--window-s", f"{window_s:g}",
                    "--skip-probe-check", "--out", str(out), *extra]
            ui.out.print(f"grid: {n} session(s) x {length:,} tokens", markup=False, highlight=False)
            subprocess.run(argv, stdout=subprocess.DEVNULL, check=False)
            new = sorted(set(out.glob("capacity-*")) - before)
            if not new:
                raise UsageError(f"grid: `loadproof run capacity -n {n} -l {length}` wrote no run (see its output)")
            made.append(new[-1])
    return made


def _calibrate_published(path: Path, out: Path, block: int, acceptance: float | None, share: float | None,
                         frontend: float | None, model: str) -> None:
    from loadproof.sim.config import dump_sim_config
    from loadproof.sim.published import calibrate_published, read_published

    cal = calibrate_published(read_published(path), block_size=block, acceptance=acceptance,
                              prefill_attention_share=0.5 if share is None else share,
                              frontend_s_per_token=frontend, model=model)
    out.write_text(dump_sim_config(cal.config), encoding="utf-8")
    _print_calibration(cal, out)


def _print_calibration(cal, out: Path) -> None:
    c = cal.config.cost
    block = cal.config.block_size
    ui.table(f"Sim profile {out}", ["parameter", "value"], [
        ["KV cache", f"{cal.config.kv_cache_tokens:,} tokens ({cal.config.num_gpu_blocks:,} x {block})"],
        ["max_num_seqs / budget", f"{cal.config.max_num_seqs} / {cal.config.max_num_batched_tokens} tokens per step"],
        ["step overhead", f"{c.step_overhead_s * 1e3:.3f} ms"],
        ["prefill", f"{c.prefill_s_per_token * 1e6:.3f} us/token + {c.prefill_s_per_token_ctx * 1e12:.4f} ps/token/ctx"],
        ["decode", f"{c.decode_s_per_seq * 1e3:.4f} ms/query token + {c.decode_s_per_ctx_token * 1e9:.4f} ns/ctx token"
                   f" + {c.decode_s_per_ctx_token_max * 1e9:.4f} ns x longest ctx"],
        ["speculative", (", ".join(f"batch <= {b}: {k} drafts" for b, k in c.spec_draft_by_batch)
                         + f"; acceptance {c.spec_acceptance:.3f}") if c.spec_draft_by_batch else "none"],
        ["pipeline", f"{c.pipeline_stages} stage(s)"],
        ["CUDA graphs", f"up to batch {max(c.cuda_graph_sizes)}" if c.cuda_graph_sizes else "not modeled"],
        ["request overhead", f"{c.request_overhead_s * 1e3:.1f} ms + {c.request_overhead_s_per_token * 1e6:.3f} us/token"],
    ])
    for line in cal.used:
        ui.out.print(f"used: {line}", markup=False, highlight=False)
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


@sim_app.command("predict-load")
def predict_load_cmd(
    profile: Annotated[Path, typer.Argument(metavar="SIM_PROFILE", help="a sim profile (`loadproof sim calibrate`)")],
    rate: Annotated[str, typer.Option(help="requests/s, one or several: 1,2,4,8")] = "1",
    num_requests: Annotated[int, typer.Option("--num-requests", "-n", help="requests per rate")] = 1000,
    input_tokens: Annotated[str, typer.Option(help="as `run load`: 1024, uniform:LO:HI, normal:MEAN:STD, "
                                              "lognormal:MEDIAN:SIGMA")] = "1024",
    output_tokens: Annotated[str, typer.Option(help="as `run load`")] = "128",
    arrival: Annotated[str, typer.Option(help="poisson, constant or gamma")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="gamma's shape")] = 1.0,
    max_concurrency: Annotated[Optional[int], typer.Option(help="the client's cap on requests in flight")] = None,
    seed: Annotated[int, typer.Option(help="the schedule's and the lengths' seed, as `run load`")] = 731,
    slo: Annotated[Optional[str], typer.Option(help="per-request SLOs, as `run load`: ttft=1s,tpot=100ms")] = None,
    attainment: Annotated[float, typer.Option(help="SLO attainment (%) a rate must reach to count as meeting it")] = 90.0,
) -> None:
    """Predict what `loadproof run load` measures at each rate, on the virtual clock (seconds of wall time):
    the same schedule and lengths (same seed), the same latency formulas, and the highest rate meeting the SLO."""
    from loadproof.scenarios.load import parse_slo
    from loadproof.sim.config import load_sim_config
    from loadproof.sim.virtual import predict_load
    from loadproof.workloads.arrivals import ArrivalSpec, intended_offsets
    from loadproof.workloads.synthetic import draw_lengths, parse_lengths

    cfg = load_sim_config(profile)
    try:
        rates = [float(r) for r in rate.split(",") if r.strip()]
        inputs_spec, outputs_spec = parse_lengths(input_tokens), parse_lengths(output_tokens)
        slos = parse_slo(slo) if slo else {}
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not rates or any(not (r > 0 and r != float("inf")) for r in rates):
        raise UsageError("--rate takes finite rates > 0, e.g. 1,2,4")
    if num_requests < 1:
        raise UsageError("--num-requests must be >= 1")
    inputs = draw_lengths(inputs_spec, num_requests, seed, "input")
    outputs = draw_lengths(outputs_spec, num_requests, seed, "output")
    if max(i + o for i, o in zip(inputs, outputs)) > cfg.max_model_len:
        raise UsageError(f"input + output tokens exceed the profile's max_model_len {cfg.max_model_len:,}")
    rows, passing = [], []
    started = time.perf_counter()
    for r in sorted(rates):
        try:
            offsets = intended_offsets(ArrivalSpec(arrival=arrival, rate_rps=r, burstiness=burstiness,
                                                   num_requests=num_requests), seed)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        pred = predict_load(cfg, offsets, inputs, outputs, max_concurrency=max_concurrency)
        row, pct = prediction_row(pred, slos)
        row.insert(0, f"{r:g}")
        if slos and pct >= attainment:
            passing.append(r)
        rows.append(row)
    head = ["rate (req/s)", *PREDICTION_HEAD] + (["goodput (req/s)", "SLO attainment"] if slos else [])
    ui.table(f"Predicted open-loop load: {num_requests} requests per rate, {arrival} arrivals, seed {seed}, "
             f"input {input_tokens}, output {output_tokens} ({time.perf_counter() - started:.2f} s wall)", head, rows)
    if slos:
        verdict = (f"highest rate meeting the SLO ({attainment:g}% of requests): {max(passing):g} requests/s"
                   if passing else f"no rate given met the SLO ({attainment:g}% of requests)")
        ui.out.print(verdict, markup=False, highlight=False)
    ui.out.print(f"model: {cfg.source}", markup=False, highlight=False)


PREDICTION_HEAD = ["ok", "output tok/s", "TTFT p50 (s)", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p99", "E2EL p50"]


def prediction_row(pred: Any, slos: dict[str, float]) -> tuple[list[str], float]:
    """A predicted run's figures, computed by the load scenario's own formulas on its records (the columns
    of PREDICTION_HEAD, then goodput and attainment with SLOs), and its SLO attainment %."""
    from loadproof.metrics.distribution import percentile
    from loadproof.metrics.load import meets, samples_ns, slo_values, succeeded

    ok = [rec for rec in pred.records if succeeded(rec)]
    values = samples_ns(pred.records)
    duration = (max(rec.end_ns for rec in pred.records) - min(rec.intended_send_ns or 0 for rec in pred.records)) / 1e9

    def p(name: str, q: float) -> str:
        v = sorted(values[name])
        return f"{percentile(v, q) / 1e9:.3f}" if v else "n/a"

    row = [f"{len(ok)}/{len(pred.records)}", f"{sum(rec.output_tokens or 0 for rec in ok) / duration:,.1f}",
           p("ttft_s", 50), p("ttft_s", 99), p("tpot_s", 50), p("tpot_s", 99), p("itl_s", 99), p("e2el_s", 50)]
    pct = 0.0
    if slos:
        good = sum(meets(slo_values(rec), slos) for rec in pred.records)
        pct = 100 * good / len(pred.records)
        row += [f"{good / duration:.3f}", f"{pct:.1f}%"]
    return row, pct


@sim_app.command("predict-replay")
def predict_replay_cmd(
    profile: Annotated[Path, typer.Argument(metavar="SIM_PROFILE", help="a sim profile (`loadproof sim calibrate`)")],
    trace: Annotated[str, typer.Option(help="the trace file, as `run replay`")],
    format: Annotated[str, typer.Option("--format", help="mooncake, azure or csv")] = "mooncake",
    time_scale: Annotated[float, typer.Option(help="replay X times faster")] = 1.0,
    max_requests: Annotated[Optional[int], typer.Option(help="replay at most N requests")] = None,
    start_offset_s: Annotated[float, typer.Option(help="skip the trace's first S seconds")] = 0.0,
    block_tokens: Annotated[int, typer.Option(help="tokens of a trace block (Mooncake's 512 scaled to B)")] = 512,
    max_input_tokens: Annotated[Optional[int], typer.Option(help="cap each prompt at this many tokens")] = None,
    max_output_tokens: Annotated[Optional[int], typer.Option(help="cap each output")] = None,
    overhead_tokens: Annotated[int, typer.Option(help="tokens the engine adds to each prompt (template, BOS)")] = 1,
    max_concurrency: Annotated[Optional[int], typer.Option(help="the client's cap on requests in flight")] = None,
    slo: Annotated[Optional[str], typer.Option(help="per-request SLOs, as `run load`: ttft=2s")] = None,
    skip_bad_rows: Annotated[bool, typer.Option(help="skip rows that do not parse, counting them")] = False,
) -> None:
    """Predict what `loadproof run replay` measures, on the virtual clock: the trace's send times and
    lengths shaped as `run replay` shapes them, its shared blocks as shared KV blocks, the same latency
    formulas, and the prefix-cache hit rate beside the one the trace promises."""
    from loadproof.metrics.replay import expected_hits
    from loadproof.scenarios.load import parse_slo
    from loadproof.sim.config import load_sim_config
    from loadproof.sim.virtual import predict_load, trace_block_hashes
    from loadproof.workloads.traces import TRACE_FORMATS, read_trace, shape

    cfg = load_sim_config(profile)
    if format not in TRACE_FORMATS:
        raise UsageError(f"--format {format}: takes {', '.join(TRACE_FORMATS)}")
    if time_scale <= 0 or block_tokens < 1 or overhead_tokens < 0:
        raise UsageError("--time-scale must be > 0, --block-tokens >= 1 and --overhead-tokens >= 0")
    try:
        slos = parse_slo(slo) if slo else {}
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    started = time.perf_counter()
    read = read_trace(trace, format, start_offset_s=start_offset_s, max_requests=max_requests,
                      skip_bad_rows=skip_bad_rows)
    shaped = shape(read.rows, block_tokens=block_tokens, overhead_tokens=overhead_tokens,
                   max_input_tokens=max_input_tokens, max_output_tokens=max_output_tokens,
                   max_model_len=cfg.max_model_len)
    first = read.rows[0].t_s
    offsets = [(row.t_s - first) / time_scale for row in read.rows]
    inputs = [s.text_tokens + overhead_tokens for s in shaped]
    outputs = [s.output_tokens for s in shaped]
    hashes = [trace_block_hashes(s.blocks, s.text_tokens, overhead_tokens, block_tokens, cfg.block_size)
              for s in shaped]
    pred = predict_load(cfg, offsets, inputs, outputs, max_concurrency=max_concurrency, hashes=hashes)
    row, _ = prediction_row(pred, slos)
    head = list(PREDICTION_HEAD) + (["goodput (req/s)", "SLO attainment"] if slos else [])
    ui.table(f"Predicted replay: {len(shaped)} requests of {Path(trace).name} ({format}), time scale {time_scale:g}, "
             f"block {block_tokens} tokens, {sum(s.capped for s in shaped)} inputs capped "
             f"({time.perf_counter() - started:.2f} s wall)", head, [row])
    blocks = [list(s.blocks) for s in shaped] if format == "mooncake" else [[] for _ in shaped]
    hits = expected_hits([s.text_tokens for s in shaped], blocks, block_tokens)
    expected = 100 * sum(hits) / sum(inputs)
    modeled = 100 * pred.prefix_cache_hits / pred.prefix_cache_queries if pred.prefix_cache_queries else 0.0
    ui.out.print(f"prefix-cache hit rate: expected from the trace {expected:.2f}%, the modeled engine {modeled:.2f}% "
                 f"({cfg.block_size}-token KV blocks, {cfg.num_gpu_blocks * cfg.block_size:,} tokens of cache)",
                 markup=False, highlight=False)
    ui.out.print(f"model: {cfg.source}", markup=False, highlight=False)
