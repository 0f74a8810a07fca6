"""Predictions: a scenario run on the simulator's virtual clock and judged by the scenario's own formulas.

What `loadproof sim predict-load|predict-replay` and `loadproof plan --simulate` compute, as functions
of the scenarios' own typed options (`LoadOptions`, `ReplayOptions`, `CapacityOptions`); the command
line only parses into them and prints what comes back.

- capacity (prefill: one session): `sim.virtual.predict_capacity`, judged by the `evaluate_capacity`
  that judges a measured run;
- load: one predicted run per rate, each with the schedule and the lengths `run load` draws from the
  same seed (`intended_offsets`, `draw_lengths`), and its records' claims from `metrics.load.load_claims`
  (the names and formulas of a run's claims.json: `load.ttft_s.p50`, `load.goodput_rps`, ...); a rate
  meets the SLO by `metrics.load_series.trial_verdict`, the rule of `run load --search rate`, at
  `--attainment` (a fraction, as there);
- replay: the trace read and shaped as `run replay` shapes it, its shared blocks as shared KV blocks,
  the same load claims, and the prefix-cache hit rate the trace promises (`metrics.replay.expected_hits`)
  beside the modeled engine's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import Field

from loadproof.config.base import StrictModel
from loadproof.errors import ConfigError, UsageError
from loadproof.metrics.capacity import evaluate_capacity
from loadproof.metrics.claims import Claim
from loadproof.metrics.load import load_claims
from loadproof.metrics.load_series import trial_verdict
from loadproof.metrics.replay import expected_hits
from loadproof.plans.load import LoadLengths, LoadPlan
from loadproof.plans.replay import ReplayPlan
from loadproof.scenarios.capacity import CapacityOptions
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.options import CliOption, cli_options, from_cli
from loadproof.scenarios.replay import ReplayOptions
from loadproof.sim.assumptions import scheduler_assumptions
from loadproof.sim.config import SimConfig
from loadproof.sim.spec import draft_by_batch
from loadproof.sim.virtual import predict_capacity, predict_load, trace_block_hashes
from loadproof.workloads.arrivals import ALL_AT_ONCE, RequestRate, intended_offsets, parse_rate
from loadproof.workloads.synthetic import Lengths, draw_lengths
from loadproof.workloads.traces import HASHED, read_trace, shape

SIMULATED = ("capacity", "prefill", "load", "replay")  # what `plan --simulate` predicts

# the options of `run load` a prediction honours, and where its defaults differ from a run's
LOAD_FIELDS = (
    "rate",
    "num_requests",
    "input_tokens",
    "output_tokens",
    "arrival",
    "burstiness",
    "max_concurrency",
    "seed",
    "slo",
    "attainment",
)
RATES_SYNTAX = "requests/s, one or several: 1,2,4,8 (inf: every request at once)"
# the attainment's default is run load's own (LoadOptions.attainment): a prediction judges a rate as its search would
LOAD_CHANGES: dict[str, dict[str, Any]] = {
    "rate": {"default": "1", "help": f"one predicted run per rate, {RATES_SYNTAX}"},
    "num_requests": {"default": 1000, "help": "requests per rate"},
    "attainment": {
        "help": "the SLO attainment (good / all requests, a fraction, as "
        "`run load --attainment`) a rate must reach to meet the SLO",
    },
}
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


def load_cli_options() -> list[CliOption]:
    """The options of `sim predict-load` (and `plan --simulate load`): `run load`'s, as its model declares
    them, with the prediction's defaults."""
    picked = {o.field: o for o in cli_options(LoadOptions) if o.field in LOAD_FIELDS}
    return [replace(picked[name], **LOAD_CHANGES.get(name, {})) for name in LOAD_FIELDS]


def replay_cli_options() -> list[CliOption]:
    """The options of `sim predict-replay` (and `plan --simulate replay`): `run replay`'s, then the engine's."""
    picked = {o.field: o for o in cli_options(ReplayOptions) if o.field in REPLAY_FIELDS}
    return [picked[name] for name in REPLAY_FIELDS] + cli_options(ReplayEngine)


def check_applies(simulate: str | None, given: Iterable[str]) -> None:
    """Refuse an option of one prediction given to another (`plan --simulate capacity --rate 2`)."""
    own = {"load": load_cli_options(), "replay": replay_cli_options()}
    mine = {o.field for o in own.get(simulate or "", [])}
    for kind, options in own.items():
        for option in options:
            if option.field in given and option.field not in mine:
                raise UsageError(f"{option.flag} applies to --simulate {kind}")


def parse_rates(value: object) -> tuple[RequestRate, ...]:
    """`1,2,4,8` -> the rates, ascending and each once (all at once last), each read by `run load --rate`'s
    parser."""
    parts = [p for p in str(value).split(",") if p.strip()]
    if not parts:
        raise ValueError(f"takes {RATES_SYNTAX}")
    return tuple(sorted(set(parse_rate(p) for p in parts), key=_order))


def _order(rate: RequestRate) -> float:
    return float("inf") if rate is ALL_AT_ONCE else float(rate)  # type: ignore[arg-type]


def read_attainment(value: float) -> tuple[float, str | None]:
    """(the attainment as a fraction, a deprecation line or None). A value above 1 is the old percentage
    spelling of `sim predict-load --attainment 90`, read as value / 100."""
    if value > 1:
        fraction = value / 100
        return fraction, (
            f"deprecated: --attainment {value:g} is a percentage; give a fraction, as `run load` "
            f"takes it: --attainment {fraction:g}"
        )
    return value, None


@dataclass(frozen=True)
class RateSweep:
    """A load prediction's question: `run load`'s options (validated once; the rate is the first of
    `rates_rps`) and one predicted run per rate."""

    options: LoadOptions
    rates_rps: tuple[RequestRate, ...]
    notes: tuple[str, ...] = ()  # deprecations to show the user


def rate_sweep(values: dict[str, Any], source: str = "sim predict-load") -> RateSweep:
    """A RateSweep from command-line values keyed by `LOAD_FIELDS` (None: the prediction's default)."""
    given = {k: v for k, v in values.items() if k in LOAD_FIELDS and v is not None}
    given = {**{k: c["default"] for k, c in LOAD_CHANGES.items() if "default" in c}, **given}
    try:
        rates = parse_rates(given.pop("rate"))
    except ValueError as exc:
        raise ConfigError(f"--rate {values.get('rate')}: {exc}") from None
    note = None
    if "attainment" in given:  # else LoadOptions' own default
        given["attainment"], note = read_attainment(float(given["attainment"]))
    options = from_cli(LoadOptions, {**given, "rate": rates[0]}, source)
    return RateSweep(options, rates, (note,) if note else ())


@dataclass(frozen=True)
class PredictedRun:
    """One predicted run: its claims, computed from its records by the scenario's metrics module."""

    claims: tuple[Claim, ...]
    num_steps: int
    modeled_s: float

    def value(self, name: str) -> Any:
        """A claim's value by name (`load.ttft_s.p50`); None when the run has no such claim."""
        return next((c.value for c in self.claims if c.name == name), None)

    @property
    def num_ok(self) -> int:
        return int(self.value("load.requests") or 0) - int(self.value("load.failed_requests") or 0)


@dataclass(frozen=True)
class RatePrediction:
    rate_rps: RequestRate
    run: PredictedRun
    meets_slo: bool  # False without an SLO
    why: str  # the verdict's reason (`trial_verdict`'s)


@dataclass(frozen=True)
class LoadForecast:
    sweep: RateSweep
    rates: tuple[RatePrediction, ...]
    wall_s: float

    @property
    def best_rate_rps(self) -> RequestRate | None:
        """The highest rate meeting the SLO (None: none did, or no SLO)."""
        return max((r.rate_rps for r in self.rates if r.meets_slo), key=_order, default=None)


def predict_load_sweep(config: SimConfig, sweep: RateSweep) -> LoadForecast:
    """What `run load` measures at each rate of `sweep` on the modeled engine (see the module doc)."""
    opts = sweep.options
    started = time.perf_counter()
    out = []
    for rate in sweep.rates_rps:
        schedule = opts.one_run(rate).arrival_spec()
        try:
            offsets = intended_offsets(schedule, opts.seed)
        except ValueError as exc:
            raise UsageError(f"load schedule: {exc}") from None
        inputs = draw_lengths(opts.input_tokens, len(offsets), opts.seed, "input")
        outputs = draw_lengths(opts.output_tokens, len(offsets), opts.seed, "output")
        if max(i + o for i, o in zip(inputs, outputs)) > config.max_model_len:
            raise UsageError(f"input + output tokens exceed the profile's max_model_len {config.max_model_len:,}")
        pred = predict_load(config, offsets, inputs, outputs, max_concurrency=opts.max_concurrency)
        every = rate is ALL_AT_ONCE
        plan = LoadPlan(
            arrival=schedule.arrival,
            rate_rps=None if every else rate,
            all_at_once=every,  # type: ignore[arg-type]
            burstiness=schedule.burstiness,
            num_requests=opts.num_requests,
            max_concurrency=opts.max_concurrency,
            seed=opts.seed,
            planned_requests=len(offsets),
            rescaled=schedule.rescaled,
            schedule_span_s=round(offsets[-1], 9),
            input_tokens=_lengths(opts.input_tokens),
            output_tokens=_lengths(opts.output_tokens),
            slo=dict(opts.slo or {}),
            max_model_len=config.max_model_len,
        )
        run = PredictedRun(tuple(load_claims(pred.records, plan, [], [])), pred.num_steps, pred.modeled_s)
        out.append(RatePrediction(rate, run, *_verdict(run, opts.attainment) if opts.slo else (False, "")))
    return LoadForecast(sweep, tuple(out), time.perf_counter() - started)


def _verdict(run: PredictedRun, attainment: float) -> tuple[bool, str]:
    return trial_verdict(
        {
            "slo_attainment_pct": run.value("load.slo_attainment_pct"),
            "client_limited": run.value("load.client_limited"),
        },
        attainment,
    )


def _lengths(spec: Lengths) -> LoadLengths:
    return LoadLengths(kind=spec.kind, a=spec.a, b=spec.b, text=str(spec))


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
    run = PredictedRun(tuple(load_claims(pred.records, plan, [], [])), pred.num_steps, pred.modeled_s)  # type: ignore[arg-type]
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


@dataclass(frozen=True)
class CapacityForecast:
    scenario: str  # capacity or prefill (one session, not judged)
    options: CapacityOptions
    claims: tuple[Claim, ...]
    verdict: str | None
    reason: str
    num_steps: int
    modeled_s: float
    wall_s: float


def capacity_options(
    sessions: int, input_tokens: int, window_s: float, source: str = "plan --simulate"
) -> CapacityOptions:
    return from_cli(CapacityOptions, {"sessions": sessions, "input_tokens": input_tokens, "window_s": window_s}, source)


def predict_capacity_run(config: SimConfig, scenario: str, options: CapacityOptions) -> CapacityForecast:
    """The capacity scenario (prefill: one session) on the modeled engine, judged as a measured run is."""
    if scenario not in ("capacity", "prefill"):
        raise UsageError(f"--simulate {scenario!r}: the simulator predicts {', '.join(SIMULATED)}")
    if options.input_tokens >= config.max_model_len:
        raise UsageError(f"--input-tokens {options.input_tokens:,} does not fit max_model_len {config.max_model_len:,}")
    if scenario == "prefill":
        options = options.model_copy(update={"sessions": 1})
    started = time.perf_counter()
    pred = predict_capacity(
        config,
        options.sessions,
        options.input_tokens,
        options.window_s,
        max_tokens=options.max_tokens,
        max_gap_s=options.max_gap_s,
        sample_interval_s=options.sample_interval_s,
        first_token_timeout_s=options.first_token_timeout_s,
        admission_stall_s=options.admission_stall_s,
    )
    result = evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events)
    return CapacityForecast(
        scenario,
        options,
        tuple(result.claims),
        result.verdict,
        result.reason,
        pred.num_steps,
        pred.modeled_s,
        time.perf_counter() - started,
    )


def deployment_config(profile: Any, planned: Any, base: SimConfig) -> SimConfig:
    """The sim profile's step costs on a deployment (`planner.profile_plan.plan_profile`'s result): its
    context, block size, KV cache tokens (the engine's reported count where a startup log gave one, else the
    planner's) and scheduler limits."""
    dep, sched = planned.deployment, profile.scheduler
    reported = planned.reported.kv_cache_tokens if planned.reported is not None else None
    kv_tokens = reported or planned.plan.kv_cache_tokens
    return _drafting(
        profile,
        _scheduled(
            profile,
            base.model_copy(
                update={
                    "max_model_len": dep.max_model_len,
                    "block_size": dep.block_size,
                    "num_gpu_blocks": max(1, kv_tokens // dep.block_size),
                    "long_prefill_token_threshold": sched.long_prefill_threshold(dep.max_model_len),
                }
            ),
        ),
    )


def _drafting(profile: Any, config: SimConfig) -> SimConfig:
    """The profile's drafts on the sim profile's costs: its draft length by batch size (`[speculative]`'s
    draft_tokens and draft_schedule) as spec_draft_by_batch, none without `[speculative]`; the acceptance is
    the sim profile's, which a drafting profile needs (without it every draft would cost and none pay)."""
    spec, cost = profile.speculative, config.cost
    if spec is None:
        return config.model_copy(update={"cost": cost.model_copy(update={"spec_draft_by_batch": []})})
    if cost.spec_acceptance <= 0 and not cost.spec_accepted_by_pos:
        raise UsageError(
            f"{profile.name} drafts ({spec.method}, {spec.draft_tokens} tokens) but the sim profile "
            "has no draft acceptance: calibrate it with --spec-from RUN (a throughput run with drafts) "
            "or --acceptance A"
        )
    return config.model_copy(update={"cost": cost.model_copy(update={"spec_draft_by_batch": draft_by_batch(spec)})})


def simulator_deployment_config(profile: Any, base: SimConfig) -> SimConfig:
    """A deployment whose engine is the simulator itself (`engine = "sim"`, model.path a sim profile): the
    sim profile's KV and costs, the deployment's context and scheduler limits, as `loadproof sim` takes them
    from the flags the sim engine renders (the long-prefill threshold only where the profile sets one)."""
    sched = profile.scheduler
    length = profile.model.max_model_len
    given = sched.long_prefill_token_threshold is not None or sched.max_num_partial_prefills is not None
    return _scheduled(
        profile,
        base.model_copy(
            update={
                "max_model_len": length,
                "long_prefill_token_threshold": sched.long_prefill_threshold(length)
                if given
                else base.long_prefill_token_threshold,
            }
        ),
    )


def _scheduled(profile: Any, config: SimConfig) -> SimConfig:
    """`config` with the profile's max_num_seqs and token budget, and its concurrent long prefills known."""
    sched = profile.scheduler
    config = config.model_copy(
        update={
            "max_num_seqs": sched.max_num_seqs or config.max_num_seqs,
            "max_num_batched_tokens": sched.max_num_batched_tokens or config.max_num_batched_tokens,
        }
    )
    # the profile states the scheduler's settings: concurrent long prefills are known, not assumed
    assumptions = [a for a in config.assumptions if a.name != "concurrent_long_prefills"]
    return config.model_copy(
        update={
            "assumptions": scheduler_assumptions(
                config, prefills_pinned_by=f"the profile's scheduler ({profile.name})"
            )[:1]
            + assumptions
        }
    )
