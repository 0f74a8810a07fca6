"""A replay on a fleet, predicted under each router policy asked: `plan --simulate replay --replicas N --policy
A,B` (`predict.fleet` runs it on the virtual clock, `routing.Router` decides).

For each policy: the fleet's prefix-cache hit rate (every replica engine's hits over its queries, as the
engines' counters would say), TTFT p50 and p99 by the load scenario's own formulas with the range the sim
profile's open assumptions leave them (`predict.ranges`), the requests each replica got and its own hit rate,
and how far the busiest replica is above an even share; then each policy against the first. A recorded agent
(`--format otel`) is sent as its dependencies allow (`predict.replay_agent`, `fleet.Chain`). Where the model is a
hybrid whose sliding window each replica keeps only at checkpoints (Gemma 3 on vLLM 0.32), the fleet's hit rate
with that cut too (`fleet.checkpointed_hit_pct`; the TTFTs are the modelled engines', every block kept).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from loadproof.config.base import StrictModel
from loadproof.metrics.load import PREDICTED_LATENCIES, SCENARIO, load_claims
from loadproof.predict.base import Show
from loadproof.predict.fleet import FleetPrediction, checkpointed_hit_pct, fleet_open_loop
from loadproof.predict.load import PredictedRun
from loadproof.predict.ranges import FigureRange, predict_ranges
from loadproof.predict.replay_requests import ReplayEngine, ReplayRequests, replay_requests
from loadproof.routing import MODELLED_POLICIES, SESSION_HEADERS, Router
from loadproof.scenarios.options import Panel, among, cli
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.sim.config import SimConfig

TTFT = PREDICTED_LATENCIES[:2]  # TTFT p50 and p99, as metrics/load.py names them
HIT = "fleet.prefix_hit_pct"


class ReplayFleet(StrictModel):
    """The fleet a replay is predicted on: replicas of the profile's engine behind a modelled router."""

    replicas: int = Field(
        default=1,
        ge=1,
        le=64,
        description="predict the replay on N replicas of the profile's engine behind a router, one prediction "
        "per --policy (1: the one engine)",
        json_schema_extra=cli(panel=Panel.SCALE_OUT),
    )
    policies: Annotated[list[str], among(MODELLED_POLICIES, "router policies")] = Field(
        default_factory=lambda: ["round_robin", "cache_aware"],
        description="with --replicas: vllm-router's policies to predict the fleet under, modelled (random, "
        "round_robin, cache_aware, kv_aware, power_of_two, consistent_hash, sticky_least_loaded), each against "
        "the first",
        json_schema_extra=cli("--policy", panel=Panel.SCALE_OUT, metavar="P,..."),
    )
    cache_threshold: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="cache_aware: the share of a prompt's blocks matched above which it stays with that replica",
        json_schema_extra=cli(panel=Panel.SCALE_OUT),
    )
    balance_abs_threshold: int = Field(
        default=64,
        ge=0,
        description="cache_aware goes to the least loaded when max - min in-flight requests is above this...",
        json_schema_extra=cli(panel=Panel.SCALE_OUT),
    )
    balance_rel_threshold: float = Field(
        default=1.5,
        ge=1,
        description="...and the max is above the min times this",
        json_schema_extra=cli(panel=Panel.SCALE_OUT),
    )

    @model_validator(mode="after")
    def _a_fleet(self) -> ReplayFleet:
        # `sim predict-replay` passes every option's default: only a policy list other than it asks for a fleet
        default = type(self).model_fields["policies"].get_default(call_default_factory=True)
        if self.replicas == 1 and "policies" in self.model_fields_set and self.policies != default:
            raise ValueError("--policy predicts a fleet: give --replicas 2 or more")
        return self

    def router(self, policy: str) -> Router:
        return Router(
            policy,
            self.replicas,
            cache_threshold=self.cache_threshold,
            balance_abs_threshold=self.balance_abs_threshold,
            balance_rel_threshold=self.balance_rel_threshold,
        )


@dataclass(frozen=True)
class PolicyForecast:
    policy: str
    fleet: FleetPrediction
    run: PredictedRun
    ranges: dict[str, FigureRange]  # TTFT p50, p99 and the fleet's hit rate, each over the open assumptions
    checkpointed_pct: float | None = None  # the fleet's hit rate with a hybrid's sliding window kept at checkpoints


@dataclass(frozen=True)
class FleetForecast:
    replicas: int
    policies: tuple[PolicyForecast, ...]
    num_requests: int
    sessions: int  # distinct sessions the router is told of (0: no session header)
    expected_hit_pct: float  # one engine with an unbounded cache (metrics.replay.expected_hits)
    wall_s: float
    block_tokens: int = 0  # the blocks the expectation counts in
    sizing: str = ""  # a recorded agent's: how its messages were sized
    window: int | None = None  # a hybrid model's sliding window kept at checkpoints (None: every block kept)
    window_source: str = ""


def routed_sessions(options: ReplayOptions, replay: ReplayRequests) -> list[str | None]:
    """Each request's session as the router reads it: the trace's, where `run replay --session-header` sends
    it in a header vllm-router reads (`routing.SESSION_HEADERS`); None otherwise."""
    header = options.session_header
    if not header or header.lower() not in SESSION_HEADERS:
        return [None] * len(replay.sessions)
    return list(replay.sessions)


def predict_replay_fleet(
    config: SimConfig, options: ReplayOptions, engine: ReplayEngine, fleet: ReplayFleet, show: Show | None = None
) -> FleetForecast:
    """The replay on `fleet` under each of its policies (see the module doc)."""
    started = time.perf_counter()
    replay = replay_requests(config, options, engine)
    sessions = routed_sessions(options, replay)
    window, window_source = engine.checkpoint_window()
    out = []
    for policy in fleet.policies:
        if show is not None:
            show.progress(f"predicting {fleet.replicas} replicas under {policy}")
        point: list[tuple[FleetPrediction, PredictedRun]] = []

        def figures(
            cfg: SimConfig, policy: str = policy, point: list[tuple[FleetPrediction, PredictedRun]] = point
        ) -> dict[str, float | None]:
            pred = fleet_open_loop(
                cfg,
                fleet.router(policy),
                replay.offsets_s,
                replay.inputs,
                replay.outputs,
                replay.hashes,
                sessions,
                scenario=SCENARIO,
                max_concurrency=options.max_concurrency,
                chain=replay.chain,
            )
            run = PredictedRun(tuple(load_claims(pred.records, replay.plan, [], [])), pred.num_steps, pred.modeled_s)
            if cfg is config:
                point.append((pred, run))
            return {**{name: run.value(name) for name in TTFT}, HIT: pred.hit_pct}

        ranged = predict_ranges(config, figures)
        pred, run = point[0]
        kept = checkpointed_hit_pct(pred, replay.hashes, replay.inputs, config.block_size, window) if window else None
        out.append(PolicyForecast(policy, pred, run, {f.claim: f for f in ranged.figures}, kept))
    return FleetForecast(
        fleet.replicas,
        tuple(out),
        len(replay.inputs),
        len({s for s in sessions if s is not None}),
        replay.expected_hit_pct,
        time.perf_counter() - started,
        replay.plan.block_tokens,
        replay.sizing,
        window,
        window_source,
    )


def forecast_fleet(
    config: SimConfig, options: ReplayOptions, engine: ReplayEngine, fleet: ReplayFleet, show: Show
) -> None:
    """`plan --simulate replay --replicas N`: predict and show."""
    forecast = predict_replay_fleet(config, options, engine, fleet, show)
    agent = (
        f": {options.copies} copies {options.copy_interval_s:g} s apart, pace {options.pace}"
        if options.format == "otel"
        else ""
    )
    show_fleet(
        forecast,
        f"Predicted replay on {fleet.replicas} replicas: {forecast.num_requests} requests of "
        f"{Path(options.trace).name} ({options.format}{agent}), time scale {options.time_scale:g}, block "
        f"{forecast.block_tokens} tokens, each replica {config.num_gpu_blocks * config.block_size:,} tokens of cache "
        f"in blocks of {config.block_size}",
        show,
    )


def show_fleet(forecast: FleetForecast, title: str, show: Show) -> None:
    """The fleet's table, one row a policy, and each policy against the first."""
    rows = []
    for p in forecast.policies:
        f = p.fleet
        rows.append(
            [
                p.policy,
                f"{p.run.num_ok}/{forecast.num_requests}",
                _ranged(p.ranges.get(HIT), "{:.2f}%"),
                *([] if p.checkpointed_pct is None else [f"{p.checkpointed_pct:.2f}%"]),
                _ranged(p.ranges.get(TTFT[0]), "{:.3f}"),
                _ranged(p.ranges.get(TTFT[1]), "{:.3f}"),
                " / ".join(str(d) for d in f.decisions),
                f"{f.imbalance_pct:.1f}%",
                " / ".join(f"{f.replica_hit_pct(r):.1f}%" for r in range(forecast.replicas)),
            ]
        )
    show.table(
        title,
        [
            "policy",
            "ok",
            "fleet prefix hits",
            *([] if forecast.window is None else ["checkpointed"]),
            "TTFT p50 (s)",
            "TTFT p99 (s)",
            "requests a replica",
            "imbalance",
            "hits a replica",
        ],
        rows,
    )
    base = forecast.policies[0]
    for p in forecast.policies[1:]:
        show.line(f"{p.policy} against {base.policy}: " + _difference(base, p))
    session_note = (
        f"{forecast.sessions} sessions in a header the router reads"
        if forecast.sessions
        else "no session header (consistent_hash hashes each body; sticky_least_loaded balances each request)"
    )
    show.line(
        f"one engine with an unbounded cache would hit {forecast.expected_hit_pct:.2f}% (the trace's sharing); "
        f"{session_note}; [low-high]: the range the sim profile's open assumptions leave ({forecast.wall_s:.2f} s wall)"
    )
    if forecast.window is not None:
        show.line(
            f"checkpointed: the hits left where each replica keeps a hybrid model's sliding window of "
            f"{forecast.window} tokens only at checkpoints ({forecast.window_source}); the TTFTs keep every block"
        )
    if forecast.sizing:
        show.line(f"messages sized as run replay sizes them: {forecast.sizing}")


def _ranged(r: FigureRange | None, fmt: str) -> str:
    if r is None:
        return "n/a"
    point = fmt.format(r.point)
    if r.low == r.high:
        return point
    return f"{point} [{fmt.format(r.low)}-{fmt.format(r.high)}]"


def _difference(base: PolicyForecast, other: PolicyForecast) -> str:
    parts = [f"prefix hits {other.fleet.hit_pct - base.fleet.hit_pct:+.2f} points"]
    if base.checkpointed_pct is not None and other.checkpointed_pct is not None:
        parts.append(f"checkpointed {other.checkpointed_pct - base.checkpointed_pct:+.2f} points")
    for name, label in zip(TTFT, ("TTFT p50", "TTFT p99"), strict=True):
        a, b = base.run.value(name), other.run.value(name)
        if a is None or b is None:
            parts.append(f"{label} n/a")
            continue
        change = f" ({100 * (b - a) / a:+.1f}%)" if a else ""
        parts.append(f"{label} {b - a:+.3f} s{change}")
    parts.append(f"imbalance {other.fleet.imbalance_pct - base.fleet.imbalance_pct:+.1f} points")
    return ", ".join(parts)
