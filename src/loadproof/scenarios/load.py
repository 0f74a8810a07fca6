"""`loadproof run load`: open-loop load at a request rate; latency distributions, send lag, SLO goodput.

Every intended send time is drawn up front from the seed (`workloads.arrivals`), every prompt and body
is built before the first send (`workloads.synthetic`: exact token lengths, salted), and the sender
(`OpenLoop`) sleeps on the monotonic clock until each intended time and launches the request as a task
without waiting for any other: the schedule never waits for the server. `--max-concurrency` caps the
requests in flight with a semaphore; the wait for it shows as send lag. Each record carries its
intended send time, the moment the schedule released it (dispatch) and its actual send, so latencies
are computed from both and queueing inside the client is never hidden. The engine's /metrics are
sampled throughout. The claims are computed afterwards from the stored run (`metrics.load`).

For sweeps and searches: `run_load(target, options, out, console, rate=..., seed=...)` is one run,
recorded and reported, returning its run directory and claims.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, field_validator, model_validator

from loadproof.client import RequestSpec, StreamingClient
from loadproof.config.base import StrictModel, split_pairs
from loadproof.errors import UsageError
from loadproof.metrics.load import SLO_DEFINITIONS
from loadproof.plans import attach_plan
from loadproof.plans.load import LoadLengths, LoadPlan, LoadStage
from loadproof.protocol.openai import request_body
from loadproof.records import RequestRecord
from loadproof.scenarios.base import Target, model_info
from loadproof.scenarios.datasets import DatasetOptions
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.long_context import EXACT_LENGTH, MetricsScenario, haystack_target
from loadproof.scenarios.options import cli
from loadproof.scenarios.search import RESOLUTION_SYNTAX, Resolution, parse_resolution
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.server_metrics import MetricsScraper
from loadproof.units import NS_PER_S
from loadproof.workloads.arrivals import (ARRIVALS, MAX_PLANNED_REQUESTS, ArrivalSpec, Stage, intended_offsets,
                                          parse_rate, parse_stages)
from loadproof.workloads.synthetic import LENGTHS_SYNTAX, Lengths, SyntheticPrompts, draw_lengths, parse_lengths

if TYPE_CHECKING:
    from loadproof.scenarios.lifecycle import Console, Outcome, Setup

SLO_SYNTAX = "NAME=VALUE with a unit (s or ms), comma-separated, e.g. ttft=2s,tpot=50ms,itl_p99=200ms,e2el=30s"


def parse_slo(value: object) -> dict[str, float]:
    """`ttft=2s,tpot=50ms,itl_p99=200ms,e2el=30s` -> seconds by SLO name (a dict of seconds passes through)."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    else:
        items = split_pairs(str(value), f"each SLO is {SLO_SYNTAX}")
    if not items:
        raise ValueError(f"takes {SLO_SYNTAX}")
    slo: dict[str, float] = {}
    for name, raw in items:
        if name not in SLO_DEFINITIONS:
            raise ValueError(f"unknown SLO {name!r}: takes {', '.join(SLO_DEFINITIONS)}")
        if name in slo:
            raise ValueError(f"SLO {name} is given twice")
        seconds = raw if isinstance(raw, (int, float)) and not isinstance(raw, bool) else _duration(name, str(raw))
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"{name} must be a duration > 0 (got {raw!r})")
        slo[name] = float(seconds)
    return slo


def _duration(name: str, text: str) -> float:
    for unit, scale in (("ms", 1e-3), ("s", 1.0)):
        if text.endswith(unit):
            number = text[: -len(unit)].strip()
            try:
                return float(number) * scale
            except ValueError:
                break
    else:
        raise ValueError(f"{name}={text}: give a unit, s or ms (e.g. {name}=2s or {name}=500ms)")
    raise ValueError(f"{name}={text}: not a duration; takes {SLO_SYNTAX}")


Rate = Annotated[float, BeforeValidator(parse_rate),
                 PlainSerializer(lambda v: "inf" if math.isinf(v) else v)]
Stages = Annotated[tuple[Stage, ...], BeforeValidator(parse_stages),
                   PlainSerializer(lambda v: ",".join(str(s) for s in v))]
TokenLengths = Annotated[Lengths, BeforeValidator(parse_lengths), PlainSerializer(str)]
Slo = Annotated[dict[str, float], BeforeValidator(parse_slo)]

SWEEP_SYNTAX = "auto, or rates in requests/s separated by commas, e.g. 1,2,4,8"


def parse_sweep(value: object) -> str:
    """`auto`, or rates `1,2,4,8` (each a number > 0, none twice), normalized to `1,2,4,8`."""
    if isinstance(value, (list, tuple)):
        parts = [str(v).strip() for v in value]
    else:
        text = str(value).strip()
        if text == "auto":
            return text
        parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"takes {SWEEP_SYNTAX} (got {value!r})")
    rates: list[float] = []
    for part in parts:
        try:
            rate = float(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a rate: takes {SWEEP_SYNTAX}") from None
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"every rate must be a number of requests/s > 0 (got {part})")
        if rate in rates:
            raise ValueError(f"the rate {rate:g} is given twice")
        rates.append(rate)
    return ",".join(f"{r:g}" for r in rates)


Sweep = Annotated[str, BeforeValidator(parse_sweep)]
SearchResolution = Annotated[Resolution, BeforeValidator(parse_resolution), PlainSerializer(str)]
SEARCH_MAX_RPS = 1024.0  # the highest rate a rate search tries unless --search-max says otherwise


class LoadOptions(DatasetOptions):  # DatasetOptions: --dataset FILE and its options (scenarios/datasets.py)
    rate: Rate | None = Field(default=None, description="requests/s (a number > 0), or inf: every request at once",
                              json_schema_extra=cli(text=True))
    arrival: Literal["poisson", "constant", "gamma"] = Field(default="poisson", description="the gaps between "
                                                             "sends: " + ", ".join(ARRIVALS))
    burstiness: float = Field(default=1.0, gt=0, description="gamma's shape B (coefficient of variation 1/sqrt(B); "
                              "1 is Poisson), with --arrival gamma")
    max_concurrency: int | None = Field(default=None, ge=1, description="cap on requests in flight; the wait for a "
                                        "slot shows as send lag")
    ramp_up_s: float = Field(default=0.0, ge=0, description="the rate rises linearly from 0 to the first rate over "
                             "this many seconds first")
    stages: Stages | None = Field(default=None, description="RATE:SECONDS,... instead of --rate, e.g. 2:30,4:30",
                                  json_schema_extra=cli(text=True))
    num_requests: int | None = Field(default=None, ge=1, description="stop the schedule after N requests",
                                     json_schema_extra=cli(aliases=["-n"]))
    duration_s: float | None = Field(default=None, gt=0, description="stop the schedule at D seconds")
    seed: int = Field(default=731, description="seed of the send times, the lengths and the filler")
    input_tokens: TokenLengths = Field(default=Lengths("fixed", 1024), description=f"prompt tokens, exactly: {LENGTHS_SYNTAX}",
                                       json_schema_extra=cli(text=True))
    output_tokens: TokenLengths = Field(default=Lengths("fixed", 128), description=f"output tokens (max_tokens): "
                                        f"{LENGTHS_SYNTAX}", json_schema_extra=cli(text=True))
    shared_prefix_tokens: int = Field(default=0, ge=0, description="tokens of prompt text every request of the run "
                                      "shares at its start (0: none, every prompt salted from its first line)")
    ignore_eos: bool = Field(default=True, description="generate exactly max_tokens (--no-ignore-eos: let the "
                             "model stop)")
    slo: Slo | None = Field(default=None, description=f"per-request SLOs for goodput: {SLO_SYNTAX}",
                            json_schema_extra=cli(text=True))
    deadline_s: float = Field(default=600.0, gt=0, description="per-request deadline in seconds (a request past it "
                              "fails as timed out)")
    sample_interval_s: float = Field(default=1.0, ge=0, description="/metrics sampling interval (0: before and "
                                     "after only)", json_schema_extra=cli(hidden=True))
    idle_timeout_s: float = Field(default=120.0, ge=0, description="wait up to this long, before the run (and "
                                  "before every point of a sweep or trial of a search), for the engine to report 0 "
                                  "running and 0 waiting; else fail with 'engine busy' (0: do not wait, measure "
                                  "beside whatever else the engine serves; not with --sweep or --search)")
    # --- sweeps and the rate search (scenarios/load_series.py) ---
    sweep: Sweep | None = Field(default=None, description=f"one run per rate: {SWEEP_SYNTAX} (a synchronous run, a "
                                "throughput run, then --sweep-points rates spread between the two)",
                                json_schema_extra=cli(text=True))
    sweep_points: int = Field(default=4, ge=1, le=64, description="rates --sweep auto spreads between the "
                              "synchronous and the throughput run's request rates")
    search: Literal["rate"] | None = Field(default=None, description="find the highest rate whose SLO attainment "
                                           "meets --attainment (needs --slo; starts at --rate, default 1)")
    attainment: float = Field(default=0.99, gt=0, le=1, description="the SLO attainment (good / all requests) a "
                              "--search trial must reach to pass")
    search_resolution: SearchResolution = Field(default=Resolution(0.1, True), description="when the search stops: "
                                                f"{RESOLUTION_SYNTAX}", json_schema_extra=cli(text=True))
    search_max: float | None = Field(default=None, gt=0, description="the highest rate the search tries, requests/s "
                                     f"(default {SEARCH_MAX_RPS:g})")
    # --- scale-out of the load generator (scenarios/load_workers.py) ---
    workers: int | None = Field(default=None, ge=1, description="load-generating processes on this host (default 1)")
    ray_address: str | None = Field(default=None, description="spread the load over a Ray cluster's nodes as Ray "
                                    "tasks: auto, HOST:PORT or ray://HOST:PORT (the loadproof[ray] extra)")

    @field_validator("ray_address")
    @classmethod
    def _ray_address(cls, value: str | None) -> str | None:
        from loadproof.scenarios.load_workers import check_ray_address

        return check_ray_address(value)
    # --- end of scale-out ---

    @model_validator(mode="after")
    def _consistent(self) -> LoadOptions:
        if self.sweep is not None or self.search is not None:
            self._check_series()
            return self
        if self.rate is None and self.stages is None:
            raise ValueError("give --rate R (requests/s, or inf) or --stages RATE:SECONDS,...")
        if self.rate is not None and self.stages is not None:
            raise ValueError("give --rate or --stages, not both")
        if self.rate is not None and math.isinf(self.rate):
            if self.num_requests is None:
                raise ValueError("--rate inf sends every request at once: give --num-requests N")
            if self.ramp_up_s or self.duration_s is not None:
                raise ValueError("--rate inf sends every request at once: --ramp-up-s and --duration-s do not apply")
        elif self.rate is not None and self.num_requests is None and self.duration_s is None:
            raise ValueError("bound the run with --num-requests N or --duration-s D")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError("--burstiness applies to --arrival gamma")
        spec = self.arrival_spec()
        expected = self.num_requests or 0
        if not spec.all_at_once and math.isfinite(spec.end_s):
            expected = min(expected or math.inf, spec.expected_arrivals(spec.end_s))
        if expected > MAX_PLANNED_REQUESTS:
            raise ValueError(f"the schedule would plan about {expected:,.0f} requests, more than the "
                             f"{MAX_PLANNED_REQUESTS:,} one run may hold")
        if self.shared_prefix_tokens and self.input_tokens.kind == "fixed" \
                and self.shared_prefix_tokens >= self.input_tokens.a:
            raise ValueError(f"--shared-prefix-tokens {self.shared_prefix_tokens} leaves nothing of "
                             f"--input-tokens {self.input_tokens} to salt")
        if self.max_concurrency is not None and (self.workers or 1) > self.max_concurrency:  # scale-out
            raise ValueError(f"--max-concurrency {self.max_concurrency} is split among the workers: give at least "
                             f"one slot per worker (--workers {self.workers})")
        return self

    def _check_series(self) -> None:
        """A sweep or a rate search: many runs, each with a rate of its own."""
        what = "--sweep" if self.sweep is not None else "--search rate"
        if self.sweep is not None and self.search is not None:
            raise ValueError("give --sweep or --search rate, not both")
        if self.stages is not None:
            raise ValueError(f"{what} sets each run's rate: --stages do not apply")
        if self.sweep is not None and self.rate is not None:
            raise ValueError("--sweep sets each run's rate: give --sweep or --rate, not both")
        if self.search is not None:
            if self.slo is None:
                raise ValueError("--search rate finds the highest rate that meets an SLO: give --slo, e.g. "
                                 "--slo ttft=2s,tpot=50ms")
            if self.rate is not None and math.isinf(self.rate):
                raise ValueError("--search rate starts at --rate R, a number of requests/s (not inf)")
            if self.rate is not None and self.search_max is not None and self.rate > self.search_max:
                raise ValueError(f"--rate {self.rate:g}, where the search starts, is above --search-max "
                                 f"{self.search_max:g}")
        if self.sweep == "auto" and self.num_requests is None:
            raise ValueError("--sweep auto sends --num-requests N in its synchronous and its throughput run: give -n N")
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("bound each run with --num-requests N or --duration-s D")
        if self.idle_timeout_s == 0:
            raise ValueError(f"{what} starts every run on an idle engine: --idle-timeout-s must be > 0")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError("--burstiness applies to --arrival gamma")
        rates = [float(r) for r in self.sweep.split(",")] if self.sweep not in (None, "auto") else []
        top = max(rates, default=self.search_max or SEARCH_MAX_RPS)
        if self.search is None or self.duration_s is not None or self.num_requests is not None:
            expected = min(self.num_requests or math.inf, top * (self.duration_s or math.inf))
            if expected > MAX_PLANNED_REQUESTS:
                raise ValueError(f"a run at {top:g} requests/s would plan about {expected:,.0f} requests, more than "
                                 f"the {MAX_PLANNED_REQUESTS:,} one run may hold")

    def sweep_rates(self) -> list[float]:
        """The rates of `--sweep 1,2,4,8`; [] for `--sweep auto`."""
        return [] if self.sweep in (None, "auto") else [float(r) for r in self.sweep.split(",")]  # type: ignore[union-attr]

    def arrival_spec(self) -> ArrivalSpec:
        return ArrivalSpec(arrival=self.arrival, rate_rps=self.rate, stages=self.stages or (),
                           burstiness=self.burstiness, ramp_up_s=self.ramp_up_s, num_requests=self.num_requests,
                           duration_s=self.duration_s)


@dataclass(slots=True)
class Planned:
    """One request of the schedule, built before the first send."""

    index: int
    offset_ns: int
    spec: RequestSpec
    input_tokens: int
    output_tokens: int


LEAD_NS = 20_000_000  # the schedule starts this long after the sender is ready, so offset 0 is not already late
SPIN_NS = 2_000_000  # sleep until this close to an intended time, then yield to the loop until it comes
YIELD_EVERY = 32  # while behind, let the loop run after this many sends in a row


class OpenLoop:
    """Sends `requests` at their intended times, each as its own task; never waits for a response."""

    def __init__(self, client: StreamingClient, requests: list[Planned], *, max_concurrency: int | None,
                 scenario: str = "load", worker: int = 0, clock=time.perf_counter_ns, sleep=asyncio.sleep,
                 start_ns: int | None = None, family: str = "synthetic") -> None:
        self.family = family  # what the prompts are, in each record: synthetic, dataset or trace
        self.start_ns = start_ns  # scale-out: the agreed start on this clock (default: LEAD_NS from now)
        self.client = client
        self.requests = requests
        self.max_concurrency = max_concurrency
        self.scenario = scenario
        self.worker = worker
        self.clock = clock
        self.sleep = sleep  # a test scripts time with its own clock and sleep
        self.t0: int | None = None
        self.dispatched = 0
        self.last_offset_ns = 0
        self.pending: set[asyncio.Task[Any]] = set()

    async def run(self, on_start=None) -> None:
        clock, sleep, create = self.clock, self.sleep, asyncio.create_task
        sem = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        pending = self.pending
        done = pending.discard
        cap = self.max_concurrency or 0
        t0 = self.t0 = clock() + LEAD_NS if self.start_ns is None else self.start_ns
        if on_start is not None:
            on_start(t0)
        behind = 0
        try:
            for item in self.requests:
                target = t0 + item.offset_ns
                now = clock()
                if target > now:
                    behind = 0
                    if target - now > SPIN_NS:
                        await sleep((target - now - SPIN_NS) / NS_PER_S)
                    while clock() < target:
                        await sleep(0)
                else:
                    behind += 1
                    if behind % YIELD_EVERY == 0:
                        await sleep(0)
                record = RequestRecord(request_id=item.spec.request_id, endpoint=item.spec.endpoint,
                                       scenario=self.scenario, family=self.family, prompt_id=f"r{item.index}",
                                       concurrency=cap, batch=item.index, intended_send_ns=target,
                                       dispatch_ns=clock(), planned_input_tokens=item.input_tokens,
                                       planned_output_tokens=item.output_tokens, worker=self.worker)
                task = create(self._one(item.spec, record, sem))
                pending.add(task)
                task.add_done_callback(done)
                self.dispatched += 1
                self.last_offset_ns = item.offset_ns
            while pending:
                await asyncio.wait(set(pending))
        finally:
            for task in pending:
                task.cancel()  # an interrupt: every stream still open is recorded as cancelled
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def _one(self, spec: RequestSpec, record: RequestRecord, sem: asyncio.Semaphore | None) -> None:
        if sem is None:
            await self.client.stream(spec, record)
            return
        async with sem:
            await self.client.stream(spec, record)


class LoadScenario(MetricsScenario):
    name = "load"
    Options = LoadOptions
    summary = ("Open-loop load at a request rate: latencies from the intended and the actual send, send lag, "
               "SLO goodput.")
    tokenizer = EXACT_LENGTH
    options: LoadOptions

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        """One run; or, with --sweep, one run per rate; or, with --search rate, the highest rate meeting the SLO."""
        if setup.options.sweep is None and setup.options.search is None:
            super().perform(setup, console)
            return
        from loadproof.scenarios.load_series import rate_search_command, sweep_command

        if setup.options.sweep is not None:
            sweep_command(setup, console)
        else:
            rate_search_command(setup, console)

    def plan(self) -> tuple[LoadPlan, list[Planned]]:
        """The schedule, the lengths, every prompt and body: everything before the first send."""
        opts = self.options
        try:
            offsets = intended_offsets(opts.arrival_spec(), opts.seed)
        except ValueError as exc:
            raise UsageError(f"load schedule: {exc}") from None
        if not offsets:
            raise UsageError("the schedule drew no request before its end: raise --duration-s or the rate")
        n = len(offsets)
        max_model_len = model_info(self.target.url, self.target.model, self.target.api_key).get("max_model_len")
        hs = haystack_target(self.target, opts.seed, PROBE_LINE)  # its prompts end with a line's newline
        if opts.dataset is not None:  # the user's data set instead of synthetic prompts
            from loadproof.scenarios.datasets import dataset_load_plan

            return dataset_load_plan(self, offsets, hs, max_model_len)
        prompts = SyntheticPrompts(hs.builder, run_salt=secrets.token_hex(8), seed=opts.seed,
                                   shared_prefix_tokens=opts.shared_prefix_tokens)
        shortest = prompts.shortest()
        if opts.input_tokens.kind == "fixed" and opts.input_tokens.a < shortest:
            raise UsageError(f"--input-tokens {opts.input_tokens} is shorter than the shortest synthetic prompt "
                             f"({shortest} tokens: the engine's {hs.builder.overhead_tokens}, the shared prefix, a "
                             "salt line and a pad)")
        inputs = draw_lengths(opts.input_tokens, n, opts.seed, "input")
        outputs = draw_lengths(opts.output_tokens, n, opts.seed, "output")
        if max_model_len is not None and opts.input_tokens.fixed and opts.output_tokens.fixed \
                and inputs[0] + outputs[0] > max_model_len:
            raise UsageError(f"--input-tokens {inputs[0]} + --output-tokens {outputs[0]} do not fit the served "
                             f"context of {max_model_len}")
        drawn = list(zip(inputs, outputs))
        if max_model_len is not None:
            inputs = [min(i, max_model_len - 1) for i in inputs]
        texts, built, _ = prompts.build_all(inputs)
        outputs = [max(1, o if max_model_len is None else min(o, max_model_len - i)) for o, i in zip(outputs, built)]
        clamped = sum((i, o) != d for i, o, d in zip(built, outputs, drawn))
        requests = []
        for k, (offset, text, length, out) in enumerate(zip(offsets, texts, built, outputs)):
            body = request_body(self.target.endpoint, self.target.model, text, max_tokens=out, temperature=0.0,
                                ignore_eos=opts.ignore_eos, extra=self.target.extra_body)
            spec = RequestSpec(request_id=f"load-{k:07d}", endpoint=self.target.endpoint, body=body,
                               deadline_s=opts.deadline_s)
            requests.append(Planned(k, round(offset * NS_PER_S), spec, length, out))
        plan = LoadPlan(
            arrival=opts.arrival,
            rate_rps=None if opts.rate is None or math.isinf(opts.rate) else opts.rate,
            all_at_once=opts.rate is not None and math.isinf(opts.rate),
            burstiness=opts.burstiness, ramp_up_s=opts.ramp_up_s,
            stages=[LoadStage(rate_rps=s.rate_rps, duration_s=s.duration_s) for s in opts.stages or ()],
            num_requests=opts.num_requests, duration_s=opts.duration_s, max_concurrency=opts.max_concurrency,
            seed=opts.seed, planned_requests=n, rescaled=opts.arrival_spec().rescaled,
            schedule_span_s=round(offsets[-1], 9),
            input_tokens=_lengths(opts.input_tokens), output_tokens=_lengths(opts.output_tokens),
            shared_prefix_tokens=opts.shared_prefix_tokens, clamped_requests=clamped, ignore_eos=opts.ignore_eos,
            deadline_s=opts.deadline_s, slo=dict(opts.slo or {}), endpoint=self.target.endpoint,
            max_model_len=max_model_len, overhead_tokens=hs.builder.overhead_tokens,
            overhead_source=hs.overhead_source, haystack_additive=hs.builder.additive,
        )
        return plan, requests

    async def run(self, writer: RunWriter, manifest: dict[str, Any], live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        if opts.idle_timeout_s > 0:  # the idle guard (docs/scenarios.md, "The engine is idle before the run")
            await self.wait_until_idle(writer, opts.idle_timeout_s)
        else:
            writer.event("engine_idle", t_ns=time.perf_counter_ns(), checked=False, waited_s=0.0)
            self.status("engine idle: not checked (--idle-timeout-s 0: the run measures beside whatever else the "
                        "engine serves)")
        # --- scale-out hook: --workers N / --ray-address run the schedule in worker processes or Ray tasks ---
        if (opts.workers or 1) > 1 or opts.ray_address:
            from loadproof.scenarios.load_workers import run_scaled_out

            return await run_scaled_out(self, writer, manifest, live)
        # --- end of the scale-out hook ---
        started = time.perf_counter()
        plan, requests = self.plan()
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        self.status(f"schedule: {plan.planned_requests} requests over {plan.schedule_span_s:.1f} s "
                    f"({_describe(plan)}), built in {time.perf_counter() - started:.2f} s")
        await send_schedule(self, writer, manifest, live, requests, plan.schedule_span_s, _describe(plan),
                            opts.max_concurrency, opts.sample_interval_s, family=self.family)

    @property
    def family(self) -> str:
        """What the prompts are, as each record says: `dataset` with --dataset, else `synthetic`."""
        return "dataset" if self.options.dataset else "synthetic"


async def send_schedule(scenario: MetricsScenario, writer: RunWriter, manifest: dict[str, Any], live: LiveStatus,
                        requests: list[Planned], span_s: float, describe: str, cap: int | None,
                        sample_interval_s: float | None, family: str = "synthetic") -> None:
    """Send an open-loop schedule (run load, run replay): the engine's metrics sampled throughout, every
    record appended as it ends, and how far the schedule got written as `schedule_end` and in the manifest,
    interrupted or not."""
    raise_open_files_limit()
    total = live.planned = len(requests)
    recorded = failed = 0

    def sink(record: RequestRecord) -> None:
        nonlocal recorded, failed
        writer.append(record)
        recorded += 1
        failed += not record.ok

    def started(t0: int) -> None:
        writer.event("schedule_start", t_ns=t0, worker=0, planned=total)
        live.phase("requests", end_ns=t0 + round(span_s * NS_PER_S), detail=describe)

    target = scenario.target
    async with MetricsScraper(target.metrics, scenario.metric_names, interval_s=sample_interval_s or None,
                              sink=writer.metric_sample, api_key=target.metrics_api_key) as scraper:
        live.watch_engine(scraper.samples)
        async with StreamingClient(target.url, api_key=target.api_key,
                                   max_connections=cap + 4 if cap else 0, on_record=live.recording(sink),
                                   on_start=live.started, keep_text=False) as client:
            sender = OpenLoop(client, requests, max_concurrency=cap, scenario=scenario.name, family=family)
            completed = False
            try:
                await sender.run(started)
                completed = True
            finally:
                end_ns = time.perf_counter_ns()
                reached = {"planned": total, "dispatched": sender.dispatched, "recorded": recorded,
                           "failed": failed, "interrupted": not completed,
                           "last_intended_offset_s": round(sender.last_offset_ns / NS_PER_S, 6),
                           "elapsed_s": round((end_ns - sender.t0) / NS_PER_S, 6) if sender.t0 else 0.0}
                writer.event("schedule_end", t_ns=end_ns, worker=0, **reached)
                manifest["schedule"] = reached
                if completed:
                    scenario.status(f"schedule: sent {sender.dispatched} of {total} requests, {failed} failed")
                else:
                    scenario.status(f"schedule interrupted: sent {sender.dispatched} of {total} requests (up to "
                                    f"{sender.last_offset_ns / NS_PER_S:.1f} s of {span_s:.1f} s), {recorded} recorded")


def _lengths(spec: Lengths) -> LoadLengths:
    return LoadLengths(kind=spec.kind, a=spec.a, b=spec.b, text=str(spec))


def _describe(plan: LoadPlan) -> str:
    if plan.all_at_once:
        return "all at once"
    shape = plan.arrival + (f" (burstiness {plan.burstiness:g})" if plan.arrival == "gamma" else "")
    ramp = f", ramp-up {plan.ramp_up_s:g} s" if plan.ramp_up_s else ""
    cap = f", at most {plan.max_concurrency} in flight" if plan.max_concurrency else ""
    return f"{shape} at {plan.rate_text} requests/s{ramp}{cap}"


def raise_open_files_limit() -> None:
    """An open loop may hold many connections: lift the soft limit on open files to the hard one."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass


def run_load(target: Target, options: LoadOptions, out: Path, console: Console, *, rate: float | str | None = None,
             seed: int | None = None, manifest_extra: dict[str, Any] | None = None, **overrides: Any) -> Outcome:
    """One load run at `rate` (replacing the options' rate or stages) with `seed`: recorded into a new
    directory under `out`, reported and shown. `outcome.run_path` is the directory, `outcome.report.claims`
    its claims. What a sweep or a rate search calls for each trial."""
    from loadproof.scenarios.lifecycle import run_once

    values = options.model_dump()
    values.update(sweep=None, search=None)  # one run of a sweep or a search is a plain run
    if rate is not None:
        values.update(rate=rate, stages=None)
    if seed is not None:
        values["seed"] = seed
    values.update(overrides)
    return run_once(LoadScenario(target, LoadOptions.model_validate(values)), out, console, manifest_extra)


def demo(setup: DemoSetup) -> LoadScenario:
    """For `loadproof demo`: Poisson at 2 requests/s for 15 s, 128 tokens in, 32 out, with SLOs."""
    return LoadScenario(setup.target, LoadOptions(rate=2.0, duration_s=15.0, input_tokens=128, output_tokens=32,
                                                  slo="ttft=1s,tpot=100ms"))
