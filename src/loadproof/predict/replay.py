"""The replay scenario on the simulator, its catalog entry's `predict`: what `loadproof sim predict-replay` and
`plan --simulate replay` compute from `run replay`'s own typed options (`ReplayOptions`).

The trace is read and shaped as `run replay` shapes it, its shared blocks become shared KV blocks
(`trace_block_hashes`), the requests are sent on the virtual clock at the trace's times, and the predicted
run's claims are the load scenario's formulas on its plan, shown as `predict.load` shows a predicted run;
beside them, the prefix-cache hit rate the trace promises (`metrics.replay.expected_hits`) and the modeled
engine's. No ranges and no contract: its entry declares none. With `--replicas N`, the same trace on a fleet
behind each router policy asked (`predict.replay_fleet`). A recorded agent (`--format otel`) is sized as the
scenario sizes it (`predict.replay_agent`) and sent as its dependencies allow (`predict.fleet`, one engine a fleet
of one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadproof.errors import ConfigError
from loadproof.metrics.load import SCENARIO, load_claims
from loadproof.predict.base import Predictor, Show
from loadproof.predict.fleet import fleet_open_loop
from loadproof.predict.load import PREDICTION_HEAD, SLO_HEAD, PredictedRun, predict_load, prediction_row
from loadproof.predict.replay_fleet import ReplayFleet, forecast_fleet
from loadproof.predict.replay_requests import ReplayEngine, replay_requests
from loadproof.routing import Router
from loadproof.scenarios.options import CliOption, cli_options, from_cli
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.sim.config import SimConfig

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
    "session_header",
    "pace",
    "copies",
    "copy_interval_s",
    "input_scale",
    "tool_role",
    "seed",
)


@dataclass(frozen=True)
class ReplayForecast:
    options: ReplayOptions
    run: PredictedRun
    num_requests: int
    capped_inputs: int
    expected_hit_pct: float  # from the trace's shared blocks (an unbounded cache)
    modeled_hit_pct: float  # the modeled engine's own counters: hits / queries
    wall_s: float
    sizing: str = ""  # a recorded agent's: how its messages were sized
    block_tokens: int = 0  # the blocks the expectation counts in


def replay_options(values: dict[str, Any], source: str = "sim predict-replay") -> tuple[ReplayOptions, ReplayEngine]:
    """`run replay`'s options and the engine's, from command-line values keyed by field name."""
    if values.get("trace") is None:
        raise ConfigError(f"{source}: give --trace FILE, the trace to replay")
    own = {k: v for k, v in values.items() if k in REPLAY_FIELDS}
    options = from_cli(ReplayOptions, own, source)
    default = ReplayEngine.model_fields["overhead_tokens"].default  # `sim predict-replay` passes it when not given
    if options.format == "otel" and values.get("overhead_tokens") not in (None, default):
        raise ConfigError(
            f"{source}: --overhead-tokens: a recorded agent's prompts are counted whole, the chat template "
            "included (--tokenizer)"
        )
    return options, from_cli(ReplayEngine, values, source)


def predict_replay_trace(config: SimConfig, options: ReplayOptions, engine: ReplayEngine) -> ReplayForecast:
    """What `run replay` measures on the modeled engine (see the module doc)."""
    started = time.perf_counter()
    replay = replay_requests(config, options, engine)
    if replay.chain is not None:  # a recorded agent: each request after its dependencies, on a fleet of one
        one = fleet_open_loop(
            config,
            Router("round_robin", 1),
            replay.offsets_s,
            replay.inputs,
            replay.outputs,
            replay.hashes,
            [None] * len(replay.inputs),
            scenario=SCENARIO,
            max_concurrency=options.max_concurrency,
            chain=replay.chain,
        )
        records, steps, modeled_s, hits, queries = (
            one.records,
            one.num_steps,
            one.modeled_s,
            one.hits[0],
            one.queries[0],
        )
    else:
        pred = predict_load(
            config,
            replay.offsets_s,
            replay.inputs,
            replay.outputs,
            max_concurrency=options.max_concurrency,
            hashes=replay.hashes,
        )
        records, steps, modeled_s = pred.records, pred.num_steps, pred.modeled_s
        hits, queries = pred.prefix_cache_hits, pred.prefix_cache_queries
    run = PredictedRun(tuple(load_claims(records, replay.plan, [], [])), steps, modeled_s)
    modeled = 100 * hits / queries if queries else 0.0
    return ReplayForecast(
        options,
        run,
        len(replay.inputs),
        replay.plan.capped_inputs,
        replay.expected_hit_pct,
        modeled,
        time.perf_counter() - started,
        replay.sizing,
        replay.plan.block_tokens,
    )


def replay_cli_options() -> list[CliOption]:
    """The options of `sim predict-replay` (and `plan --simulate replay`): `run replay`'s, then the engine's."""
    picked = {o.field: o for o in cli_options(ReplayOptions) if o.field in REPLAY_FIELDS}
    return [picked[name] for name in REPLAY_FIELDS] + cli_options(ReplayEngine) + cli_options(ReplayFleet)


ReplayQuestion = tuple[ReplayOptions, ReplayEngine, ReplayFleet]


class ReplayPredictor(Predictor[ReplayQuestion]):
    """`sim predict-replay` and `plan --simulate replay` (see the module doc)."""

    command = """Predict what `loadproof run replay`
    measures, on the virtual clock: the trace's send times and lengths shaped as `run replay` shapes them, its
    shared blocks as shared KV blocks, the same claims, and the prefix-cache hit rate beside the one the trace
    promises; with --replicas, on a fleet behind each router policy of --policy (`predict.replay_fleet`)."""
    shows_plan = False

    def cli_options(self) -> list[CliOption]:
        return replay_cli_options()

    def question(self, values: dict[str, Any], source: str) -> ReplayQuestion:
        return (*replay_options(values, source), from_cli(ReplayFleet, values, source))

    def forecast(self, config: SimConfig, question: ReplayQuestion, show: Show) -> None:
        options, engine, fleet = question
        if fleet.replicas > 1:
            forecast_fleet(config, options, engine, fleet, show)
            return
        forecast = predict_replay_trace(config, options, engine)
        opts = forecast.options
        slo = bool(opts.slo)
        show.table(
            f"Predicted replay: {forecast.num_requests} requests of {Path(opts.trace).name} ({opts.format}), time "
            f"scale {opts.time_scale:g}, block {forecast.block_tokens} tokens, {forecast.capped_inputs} inputs capped "
            f"({forecast.wall_s:.2f} s wall)",
            PREDICTION_HEAD + (SLO_HEAD if slo else []),
            [prediction_row(forecast.run, slo)],
        )
        show.line(
            f"prefix-cache hit rate: expected from the trace {forecast.expected_hit_pct:.2f}%, the modeled engine "
            f"{forecast.modeled_hit_pct:.2f}% ({config.block_size}-token KV blocks, "
            f"{config.num_gpu_blocks * config.block_size:,} tokens of cache)"
        )
        if forecast.sizing:
            show.line(f"messages sized as run replay sizes them: {forecast.sizing}")


PREDICTOR = ReplayPredictor()
