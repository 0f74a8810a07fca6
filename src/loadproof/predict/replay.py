"""The replay scenario on the simulator, its catalog entry's `predict`: what `loadproof sim predict-replay` and
`plan --simulate replay` compute from `run replay`'s own typed options (`ReplayOptions`).

The trace is read and shaped as `run replay` shapes it, its shared blocks become shared KV blocks
(`trace_block_hashes`), the requests are sent on the virtual clock at the trace's times, and the predicted
run's claims are the load scenario's formulas on its plan, shown as `predict.load` shows a predicted run;
beside them, the prefix-cache hit rate the trace promises (`metrics.replay.expected_hits`) and the modeled
engine's. No ranges and no contract: its entry declares none.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from loadproof.config.base import StrictModel
from loadproof.errors import ConfigError
from loadproof.metrics.load import load_claims
from loadproof.metrics.replay import expected_hits
from loadproof.plans.replay import ReplayPlan
from loadproof.predict.base import Predictor, Show
from loadproof.predict.load import PREDICTION_HEAD, SLO_HEAD, PredictedRun, predict_load, prediction_row
from loadproof.scenarios.options import CliOption, cli_options, from_cli
from loadproof.scenarios.replay import ReplayOptions
from loadproof.sim.config import SimConfig
from loadproof.workloads.traces import HASHED, read_trace, shape

# the options of `run replay` a prediction honours
REPLAY_FIELDS = (
    "trace",
    "format",
    "time_scale",
    "max_requests",
    "start_offset_s",
    "block_tokens",
    "max_input_tokens",
    "max_output_tokens",
    "max_concurrency",
    "slo",
    "skip_bad_rows",
)


class ReplayEngine(StrictModel):
    """What a replay on a real engine measures and the simulator must be told."""

    overhead_tokens: int = Field(default=1, ge=0, description="tokens the engine adds to each prompt (template, BOS)")


@dataclass(frozen=True)
class ReplayForecast:
    options: ReplayOptions
    run: PredictedRun
    num_requests: int
    capped_inputs: int
    expected_hit_pct: float  # from the trace's shared blocks (an unbounded cache)
    modeled_hit_pct: float  # the modeled engine's own counters: hits / queries
    wall_s: float


def replay_options(values: dict[str, Any], source: str = "sim predict-replay") -> tuple[ReplayOptions, ReplayEngine]:
    """`run replay`'s options and the engine's, from command-line values keyed by field name."""
    if values.get("trace") is None:
        raise ConfigError(f"{source}: give --trace FILE, the trace to replay")
    own = {k: v for k, v in values.items() if k in REPLAY_FIELDS}
    return from_cli(ReplayOptions, own, source), from_cli(ReplayEngine, values, source)


def predict_replay_trace(config: SimConfig, options: ReplayOptions, engine: ReplayEngine) -> ReplayForecast:
    """What `run replay` measures on the modeled engine (see the module doc)."""
    started = time.perf_counter()
    overhead = engine.overhead_tokens
    read = read_trace(
        options.trace,
        options.format,
        start_offset_s=options.start_offset_s,
        max_requests=options.max_requests,
        skip_bad_rows=options.skip_bad_rows,
    )
    shaped = shape(
        read.rows,
        block_tokens=options.block,
        overhead_tokens=overhead,
        max_input_tokens=options.max_input_tokens,
        max_output_tokens=options.max_output_tokens,
        max_model_len=config.max_model_len,
    )
    first = read.rows[0].t_s
    offsets = [(row.t_s - first) / options.time_scale for row in read.rows]
    inputs = [s.text_tokens + overhead for s in shaped]
    outputs = [s.output_tokens for s in shaped]
    hashes = [trace_block_hashes(s.blocks, s.text_tokens, overhead, options.block, config.block_size) for s in shaped]
    pred = predict_load(config, offsets, inputs, outputs, max_concurrency=options.max_concurrency, hashes=hashes)
    blocks = [list(s.blocks) for s in shaped] if options.format in HASHED else [[] for _ in shaped]
    # the replay's claims are the load scenario's, computed on its plan (metrics.replay names them replay.*)
    plan = ReplayPlan(
        trace=options.trace,
        format=options.format,
        sha256=read.sha256,
        trace_rows=read.lines,
        bad_rows=read.bad_rows,
        before_offset=read.before_offset,
        time_scale=options.time_scale,
        start_offset_s=options.start_offset_s,
        max_requests=options.max_requests,
        trace_span_s=round(read.rows[-1].t_s - first, 6),
        block_tokens=options.block,
        max_input_tokens=options.max_input_tokens,
        max_output_tokens=options.max_output_tokens,
        capped_inputs=sum(s.capped for s in shaped),
        planned_requests=len(shaped),
        schedule_span_s=round(offsets[-1], 9),
        max_concurrency=options.max_concurrency,
        slo=dict(options.slo or {}),
        max_model_len=config.max_model_len,
        overhead_tokens=overhead,
        text_tokens=[s.text_tokens for s in shaped],
        hash_ids=blocks if options.format in HASHED else [],
    )
    run = PredictedRun(tuple(load_claims(pred.records, plan, [], [])), pred.num_steps, pred.modeled_s)
    hits = expected_hits(plan.text_tokens, blocks, options.block)
    modeled = 100 * pred.prefix_cache_hits / pred.prefix_cache_queries if pred.prefix_cache_queries else 0.0
    return ReplayForecast(
        options,
        run,
        len(shaped),
        plan.capped_inputs,
        100 * sum(hits) / sum(inputs),
        modeled,
        time.perf_counter() - started,
    )


def trace_block_hashes(
    blocks: list[Any], text_tokens: int, overhead_tokens: int, block_tokens: int, block_size: int
) -> list[int]:
    """The chained hashes of the engine's full KV blocks (`block_size`) of a replayed prompt: the engine's
    overhead (the same for every prompt), then the trace's blocks of `block_tokens`, each named by its id, the
    last cut to the text. Two prompts share a KV block exactly when they share every token up to its end, as
    the prompts `run replay` builds do (a block is a function of its id; the head names the id)."""
    total = overhead_tokens + text_tokens
    out: list[int] = []
    parent = b"replay"
    for start in range(0, total - block_size + 1, block_size):
        end = start + block_size
        pieces = []
        p = start
        while p < end:  # the segments of this KV block: overhead, then (trace block, from, to)
            if p < overhead_tokens:
                q = min(end, overhead_tokens)
                pieces.append(f"o{p}-{q}")
            else:
                k, at = divmod(p - overhead_tokens, block_tokens)
                q = min(end, overhead_tokens + (k + 1) * block_tokens)
                pieces.append(f"{blocks[k]!r}:{at}-{at + q - p}")
            p = q
        parent = hashlib.blake2b(parent + "|".join(pieces).encode(), digest_size=8).digest()
        out.append(int.from_bytes(parent, "big"))
    return out


def replay_cli_options() -> list[CliOption]:
    """The options of `sim predict-replay` (and `plan --simulate replay`): `run replay`'s, then the engine's."""
    picked = {o.field: o for o in cli_options(ReplayOptions) if o.field in REPLAY_FIELDS}
    return [picked[name] for name in REPLAY_FIELDS] + cli_options(ReplayEngine)


class ReplayPredictor(Predictor[tuple[ReplayOptions, ReplayEngine]]):
    """`sim predict-replay` and `plan --simulate replay` (see the module doc)."""

    command = """Predict what `loadproof run replay`
    measures, on the virtual clock: the trace's send times and lengths shaped as `run replay` shapes them, its
    shared blocks as shared KV blocks, the same claims, and the prefix-cache hit rate beside the one the trace
    promises."""
    shows_plan = False

    def cli_options(self) -> list[CliOption]:
        return replay_cli_options()

    def question(self, values: dict[str, Any], source: str) -> tuple[ReplayOptions, ReplayEngine]:
        return replay_options(values, source)

    def forecast(self, config: SimConfig, question: tuple[ReplayOptions, ReplayEngine], show: Show) -> None:
        forecast = predict_replay_trace(config, *question)
        opts = forecast.options
        slo = bool(opts.slo)
        show.table(
            f"Predicted replay: {forecast.num_requests} requests of {Path(opts.trace).name} ({opts.format}), time "
            f"scale {opts.time_scale:g}, block {opts.block} tokens, {forecast.capped_inputs} inputs capped "
            f"({forecast.wall_s:.2f} s wall)",
            PREDICTION_HEAD + (SLO_HEAD if slo else []),
            [prediction_row(forecast.run, slo)],
        )
        show.line(
            f"prefix-cache hit rate: expected from the trace {forecast.expected_hit_pct:.2f}%, the modeled engine "
            f"{forecast.modeled_hit_pct:.2f}% ({config.block_size}-token KV blocks, "
            f"{config.num_gpu_blocks * config.block_size:,} tokens of cache)"
        )


PREDICTOR = ReplayPredictor()
