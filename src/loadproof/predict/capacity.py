"""The capacity scenario on the simulator, its catalog entry's `predict` and `calibrate` (prefill's, one
session and not judged, is `predict.prefill`).

- `predict_capacity`: the scenario's shape (N sessions of L tokens sent together, a W-second window from the
  last first token, then cancellation) on the virtual clock, returning what a run directory would hold (plan,
  records, /metrics samples, events);
- `predict_capacity_run`: that prediction judged by `evaluate_capacity`, which judges a measured run;
- `CapacityPredictor`: `plan --simulate capacity` (N, L and W: `--sessions`, `-l`, `--window-s`), its ranges
  and contract (`metrics.capacity.CONTRACT`);
- `calibration_points`: what a capacity run gives `sim calibrate` (its first session's cold TTFT, the overhead
  a batch overlaps, the window's decode rate, the KV size its /metrics imply).
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

from loadproof.errors import UsageError
from loadproof.metrics.capacity import PREDICTED, WINDOW_AGGREGATE, evaluate_capacity
from loadproof.metrics.claims import Claim
from loadproof.plans import load_plan
from loadproof.plans.capacity import CapacityPlan, CapacitySession
from loadproof.predict.base import Predictor, Show, with_defaults
from loadproof.predict.points import DecodePoint, FrontendPoint, RunPoints, TtftPoint
from loadproof.predict.virtual import VirtualRun
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, Event
from loadproof.scenarios.capacity import CapacityOptions
from loadproof.scenarios.options import CliOption, cli_options, from_cli
from loadproof.sim.config import SimConfig
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S

# the options `plan --simulate capacity|prefill` takes beside its own -l (L, default 1024), with its defaults
CHANGES: dict[str, dict[str, Any]] = {
    "sessions": {"flags": ("--sessions",), "default": 4, "help": "N for --simulate capacity"},
    "window_s": {"default": 60.0, "help": "W for --simulate capacity"},
}
DEFAULT_INPUT_TOKENS = 1024


@dataclass
class CapacityPrediction:
    plan: CapacityPlan
    records: list[RequestRecord]
    samples: list[EngineSample]
    events: list[Event]
    num_steps: int
    modeled_s: float


def predict_capacity(
    config: SimConfig,
    sessions: int,
    input_tokens: int,
    window_s: float,
    *,
    max_tokens: int | None = None,
    max_gap_s: float = 5.0,
    sample_interval_s: float = 0.5,
    first_token_timeout_s: float = 7200.0,
    admission_stall_s: float = 10.0,
) -> CapacityPrediction:
    """The capacity scenario of `sessions` x `input_tokens` on the modeled engine (see the module doc)."""
    if max_tokens is None:  # as the scenario does: what the context window leaves, at most 100,000
        max_tokens = min(config.max_model_len - input_tokens, 100_000)
    run = VirtualRun(config, sample_interval_s=sample_interval_s)
    run.sample()
    # sent at 0; the engine has them once upload and tokenization are done, which requests do concurrently
    run.now_s = config.cost.request_overhead(input_tokens)
    ids = [f"cap-s{i:03d}" for i in range(sessions)]
    requests = [run.add(rid, input_tokens, max_tokens, salt=f"salt-{rid}") for rid in ids]

    stall: dict[str, float | None] = {"since": None}

    def all_started() -> bool:
        # The scenario's admission-stall rule: requests wait while every running session is decoding
        # for `admission_stall_s`, so they will only get in when someone leaves: stop the cold phase.
        s = run.scheduler
        if s.waiting and s.running and all(r.num_computed >= r.prompt_tokens for r in s.running):
            since = stall["since"] = run.now_s if stall["since"] is None else stall["since"]
            if run.now_s - since >= admission_stall_s:
                return True
        else:
            stall["since"] = None
        return all(r.first_token_s is not None or r.status == "finished" for r in requests)

    run.advance(all_started, first_token_timeout_s)
    events: list[Event] = []
    if stall["since"] is not None:
        events.append(
            Event(
                kind="admission_stalled",
                t_ns=int(run.now_s * NS_PER_S),
                evidence=f"{len(run.scheduler.waiting)} request(s) waited {admission_stall_s:g} s while "
                f"all {len(run.scheduler.running)} running sessions were decoding",
            )
        )
    started = [r.first_token_s for r in requests if r.first_token_s is not None]
    if len(started) == sessions:
        window_start = max(started)
        events.append(Event(kind="window_start", t_ns=int(window_start * NS_PER_S)))
        end = window_start + window_s
        run.advance(lambda: run.now_s >= end or not run.scheduler.running, end)
    cancel_s = run.now_s + 1e-6  # the client cancels just after the window's last step
    events.append(Event(kind="cancel", t_ns=int(cancel_s * NS_PER_S)))
    for rid in ids:
        run.scheduler.abort(rid)
    run.now_s = cancel_s + 1e-3
    run.sample()

    records = []
    for rid, request in zip(ids, requests):
        times = run.token_times[rid]
        record = RequestRecord(
            request_id=rid,
            endpoint="completions",
            scenario="capacity",
            family="capacity",
            prompt_id=rid,
            concurrency=sessions,
            send_ns=0,
            prompt_tokens=input_tokens,
            output_tokens=len(times),
            chunk_ns=[int(t * NS_PER_S) for t in times],
            chunk_tokens=[1] * len(times),
            num_chunks=len(times),
        )
        if times:
            record.first_token_ns, record.last_token_ns = int(times[0] * NS_PER_S), int(times[-1] * NS_PER_S)
            record.output_text = "predicted"  # the simulator answers every probe right
        if request.finish_reason == "length":
            record.ok, record.finish_reason, record.end_ns = True, "length", int(times[-1] * NS_PER_S)
        else:
            record.error_kind, record.error_message, record.end_ns = (
                "cancelled",
                "cancelled by the client",
                int(cancel_s * NS_PER_S),
            )
        records.append(record)
    plan = CapacityPlan(
        sessions=[CapacitySession(request_id=rid, session_id=rid, expected="predicted") for rid in ids],
        input_tokens=input_tokens,
        max_tokens=max_tokens,
        window_s=window_s,
        max_gap_s=max_gap_s,
        drain_timeout_s=30.0,
        kv_idle_bound=0.02,
        check_probes=True,
        max_model_len=config.max_model_len,
        engine_kv_cache_tokens=config.kv_cache_tokens,
        theoretical_full_windows=round(config.kv_cache_tokens / config.max_model_len, 4),
    )
    return CapacityPrediction(plan, records, run.samples, events, run.num_steps, run.now_s)


@dataclass(frozen=True)
class CapacityForecast:
    judged: bool  # capacity: the acceptance verdict; prefill (one session): not judged
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
    options: CapacityOptions = from_cli(
        CapacityOptions, {"sessions": sessions, "input_tokens": input_tokens, "window_s": window_s}, source
    )
    return options


def predict_capacity_run(config: SimConfig, options: CapacityOptions, *, one_session: bool = False) -> CapacityForecast:
    """The capacity scenario (`one_session`: prefill's, one session) on the modeled engine, judged as a measured
    run is."""
    if options.input_tokens >= config.max_model_len:
        raise UsageError(f"--input-tokens {options.input_tokens:,} does not fit max_model_len {config.max_model_len:,}")
    if one_session:
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
        not one_session,
        options,
        tuple(result.claims),
        result.verdict,
        result.reason,
        pred.num_steps,
        pred.modeled_s,
        time.perf_counter() - started,
    )


class CapacityPredictor(Predictor[CapacityOptions]):
    """`plan --simulate capacity` (with `one_session`, prefill's: one session, not judged)."""

    contract_options = ("sessions", "input_tokens", "window_s", "max_tokens", "max_gap_s", "admission_stall_s")

    def __init__(self, one_session: bool = False) -> None:
        self.one_session = one_session

    def cli_options(self) -> list[CliOption]:
        own = {o.field: o for o in cli_options(CapacityOptions)}
        return [replace(own[name], **change) for name, change in CHANGES.items()]

    def question(self, values: dict[str, Any], source: str) -> CapacityOptions:
        given = with_defaults(self.cli_options(), values)
        length = values.get("input_tokens") or DEFAULT_INPUT_TOKENS
        return capacity_options(given["sessions"], length, given["window_s"], source)

    def forecast(self, config: SimConfig, question: CapacityOptions, show: Show) -> None:
        forecast = predict_capacity_run(config, question, one_session=self.one_session)
        opts = forecast.options
        by_name = {c.name: c for c in forecast.claims}
        rows = [
            [name.split(".", 1)[1], by_name[name].printed, by_name[name].unit] for name in PREDICTED if name in by_name
        ]
        if forecast.judged:
            rows.append(["acceptance (predicted)", str(forecast.verdict), forecast.reason])
        show.table(
            f"Predicted: {opts.sessions} session(s) x {opts.input_tokens:,} tokens sent together, window "
            f"{opts.window_s:g} s (simulated {forecast.modeled_s:,.1f} s in {forecast.num_steps:,} steps, "
            f"{forecast.wall_s:.2f} s wall)",
            ["figure", "value", "unit"],
            rows,
        )

    def claims(self, config: SimConfig, question: CapacityOptions) -> list[Claim]:
        return list(predict_capacity_run(config, question, one_session=self.one_session).claims)

    def options_of(self, question: CapacityOptions) -> dict[str, Any]:
        return question.model_dump(mode="json")


PREDICTOR = CapacityPredictor()


def calibration_points(run: Run) -> RunPoints:
    """A capacity run as calibration input: its first session's cold TTFT (nothing else was in the engine),
    the spacing of the next first tokens (the engine's time per prompt, so the first TTFT minus it is the
    overhead a lone request pays and a batch overlaps), the window's decode rate, and the KV size the plan
    states or, where every session started, its /metrics imply."""
    plan = load_plan(run)
    if not isinstance(plan, CapacityPlan):
        return RunPoints()
    points = RunPoints(kv_cache_tokens=plan.engine_kv_cache_tokens)
    # only where every session started: the highest-usage sample then has every prompt resident
    if all(r.ttft_ns for r in run.records):
        points.kv_inferred = kv_from_metrics(run, plan)
    firsts = sorted((r.ttft_ns / NS_PER_S, r) for r in run.records if r.ttft_ns)
    if not firsts:
        return points
    length = firsts[0][1].prompt_tokens or 0
    points.ttft.append(TtftPoint(length, firsts[0][0], f"{run.run_id} first of {len(firsts)} cold TTFTs"))
    diffs = [b - a for (a, _), (b, _) in zip(firsts, firsts[1:])][:3]
    if diffs:
        points.frontend.append(
            FrontendPoint(
                length,
                max(0.0, firsts[0][0] - statistics.median(diffs)),
                f"{run.run_id}: first TTFT - median of the next {len(diffs)} spacings",
            )
        )
    claims_path = run.path / "claims.json"
    claims = (
        {c["name"]: c["value"] for c in json.loads(claims_path.read_text(encoding="utf-8")).get("claims", [])}
        if claims_path.is_file()
        else {}
    )
    rate = claims.get(WINDOW_AGGREGATE)
    sessions = len(firsts)
    if isinstance(rate, (int, float)) and rate > 0 and sessions == len(run.records):
        outputs = [r.output_tokens or 0 for _, r in firsts]
        points.windows.append(
            DecodePoint(
                sessions,
                length + statistics.mean(outputs) / 2,
                sessions / rate,
                f"{run.run_id} window: {sessions} streams",
                window=True,
            )
        )
    return points


def kv_from_metrics(run: Run, plan: CapacityPlan | None = None) -> int | None:
    """A capacity run's KV size when its manifest does not state it: the prompt tokens resident / the KV
    usage, at the /metrics sample with the highest usage (a configuration fact, not a performance figure).
    `plan`: the run's capacity plan (read from the run when not given)."""
    read = plan if plan is not None else load_plan(run)
    length = read.input_tokens if isinstance(read, CapacityPlan) else 0
    best = max(
        (
            (v.get("kv_cache_usage_perc") or 0.0, v.get("num_requests_running") or 0.0)
            for v in (s.values for s in run.samples)
        ),
        default=(0.0, 0.0),
    )
    usage, running = best
    if usage <= 0 or running <= 0 or not length:
        return None
    return int(running * length / (usage if usage <= 1 else usage / 100))
