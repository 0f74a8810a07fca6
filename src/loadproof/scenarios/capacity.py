"""`loadproof run capacity`: can the deployment hold N sessions of L tokens, all generating together?

N haystack sessions of exactly L input tokens are started together (or staggered), each salted so the
cold phase cannot hit the prefix cache. When the last stream has its first token, the shared window of
W seconds starts; the engine's /metrics are sampled throughout. After the window every stream is
cancelled and the engine is watched until it lets go. The verdict is computed afterwards from the
stored run alone (`metrics.capacity.evaluate_capacity`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

import msgspec
from pydantic import Field

from loadproof.client import StreamingClient
from loadproof.config.base import StrictModel
from loadproof.engines import startup_report
from loadproof.errors import UsageError
from loadproof.plans import attach_plan
from loadproof.plans.capacity import CapacityPlan, CapacitySession
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.rundir.manifest import EngineInfo
from loadproof.scenarios.base import Example, Setup
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.long_context import (
    EXACT_LENGTH,
    AdmissionStall,
    LiveSessions,
    MetricsScenario,
    cache_salt_field,
    haystack_target,
    idle_timeout_field,
    new_record,
    session_spec,
)
from loadproof.scenarios.options import SAMPLING_NEEDED, ExistingPath, Panel, cli, needs_samples
from loadproof.scenarios.recording import Console, startup_of
from loadproof.scenarios.search import SEARCH_MAXIMUM, capacity_search
from loadproof.scenarios.target import Target
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.server_metrics import MetricsScraper
from loadproof.units import NS_PER_S as NS


class CapacityOptions(StrictModel):
    sessions: int = Field(
        default=4,
        ge=1,
        description="N, sessions started together",
        json_schema_extra=cli(aliases=["-n"], panel=Panel.ARRIVALS),
    )
    input_tokens: int = Field(
        default=2048,
        ge=64,
        description="L, input tokens per session, exactly",
        json_schema_extra=cli(aliases=["-l"], panel=Panel.WORKLOAD),
    )
    window_s: float = Field(
        default=10.0, gt=0, description="W, seconds of shared generation", json_schema_extra=cli(panel=Panel.ARRIVALS)
    )
    max_tokens: int | None = Field(
        default=None,
        ge=16,
        description="output tokens asked per session; "
        "default: what the context window leaves, so streams outlast the window",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    stagger_s: float = Field(
        default=0.0, ge=0, description="seconds between session starts", json_schema_extra=cli(panel=Panel.ARRIVALS)
    )
    num_probes: int = Field(
        default=1,
        ge=1,
        description="N facts planted per session (the first is asked)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    check_probes: bool = Field(
        default=True,
        description="score retrieval: every session's answer states its planted fact",
        json_schema_extra=cli(
            "--skip-probe-check",
            invert=True,
            help="do not score retrieval (random weights); said in the verdict",
            panel=Panel.CHECKS,
        ),
    )
    plant_probes: bool = Field(
        default=True,
        description="plant the fact each session is asked about",
        json_schema_extra=cli(
            "--negative-control",
            invert=True,
            help="ask about facts never planted: retrieval must FAIL",
            panel=Panel.CHECKS,
        ),
    )
    max_gap_s: float = Field(
        default=5.0,
        gt=0,
        description="longest silence, in seconds, a stream may have inside the window",
        json_schema_extra=cli(panel=Panel.CHECKS),
    )
    drain_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="seconds the engine may take to let go after cancel",
        json_schema_extra=cli(panel=Panel.CHECKS),
    )
    kv_idle_bound: float = Field(
        default=0.02, ge=0, le=1, description="KV usage after drain <= idle + this", json_schema_extra=cli(hidden=True)
    )
    first_token_timeout_s: float = Field(
        default=7200.0, gt=0, description="bound on the cold phase", json_schema_extra=cli(hidden=True)
    )
    admission_stall_s: float = Field(
        default=10.0,
        gt=0,
        description="end the cold phase once sessions have waited this many seconds while every running one was decoding",
        json_schema_extra=cli(panel=Panel.CHECKS),
    )
    sample_interval_s: Annotated[
        float, needs_samples("the verdict reads the engine's running, waiting and KV gauges through the window")
    ] = Field(default=0.5, ge=0, description=SAMPLING_NEEDED, json_schema_extra=cli(panel=Panel.ENGINE))
    idle_timeout_s: float = idle_timeout_field()
    use_cache_salt: bool = cache_salt_field()
    seed: int = Field(default=731, json_schema_extra=cli(hidden=True))


class CapacityCommand(StrictModel):
    """What `loadproof run capacity` takes beyond a run's options: the engine's log, and a search."""

    startup_log: ExistingPath | None = Field(
        default=None,
        description="the engine's startup log: its KV tokens, for the theoretical count",
        json_schema_extra=cli(panel=Panel.ENGINE, metavar="FILE"),
    )
    search: Literal["sessions", "input-tokens"] | None = Field(
        default=None,
        description="find the largest passing N (sessions) or L (input-tokens)",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH),
    )
    search_max: int | None = Field(
        default=None,
        ge=1,
        description="the search's upper bound, N or L (default: "
        f"{SEARCH_MAXIMUM['sessions']} sessions, {SEARCH_MAXIMUM['input_tokens']:,} tokens)",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH),
    )


class CapacityScenario(MetricsScenario):
    name = "capacity"
    Options = CapacityOptions
    CommandOptions = CapacityCommand
    summary = "N sessions of L tokens generating together for W seconds, verified on the engine's own metrics."
    examples = (
        Example(
            "8 sessions of 16,384 tokens generating together for 30 s",
            "--url http://127.0.0.1:8000 -n 8 -l 16384 --window-s 30",
        ),
        Example(
            "The largest number of 8,192-token sessions that passes, from the engine's startup log's KV size",
            "--url http://127.0.0.1:8000 -l 8192 --search sessions --startup-log engine.log",
        ),
    )
    tokenizer = EXACT_LENGTH
    failure = "acceptance FAILED (criteria above)"
    options: CapacityOptions

    def __init__(self, target: Target, options: CapacityOptions, startup_kv_tokens: int | None = None) -> None:
        super().__init__(target, options)
        self.startup_kv_tokens = startup_kv_tokens

    @classmethod
    def prepare(cls, setup: Setup, console: Console) -> CapacityScenario:
        log = setup.command.startup_log
        report = startup_report(log, setup.target.engine) if log is not None else None
        setup.manifest_extra = msgspec.structs.replace(
            setup.manifest_extra, engine=EngineInfo(startup_report=startup_of(report))
        )
        return cls(setup.target, setup.options, startup_kv_tokens=report.kv_cache_tokens if report else None)

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        if setup.command.search is None:
            super().perform(setup, console)
            return
        capacity_search(cls, setup, console)

    def plan(self) -> tuple[CapacityPlan, list[Any], Any]:
        opts = self.options
        hs = haystack_target(self.target, opts.seed)
        max_model_len = self.target.max_model_len
        if max_model_len is not None and opts.input_tokens >= max_model_len:
            raise UsageError(f"--input-tokens {opts.input_tokens} does not fit the served context of {max_model_len}")
        max_tokens = opts.max_tokens or (min(max_model_len - opts.input_tokens, 100_000) if max_model_len else 4096)
        prompts = [
            hs.builder.build(f"s{i:03d}", opts.input_tokens, num_probes=opts.num_probes, plant=opts.plant_probes)
            for i in range(opts.sessions)
        ]
        theory = None
        if self.startup_kv_tokens and max_model_len:
            theory = round(self.startup_kv_tokens / max_model_len, 4)
        plan = CapacityPlan(
            sessions=[
                CapacitySession(
                    request_id=f"cap-{p.session_id}",
                    session_id=p.session_id,
                    salt=p.salt,
                    key=p.asked.key,
                    expected=p.asked.value,
                    planted=p.asked.planted,
                    probe_depths=[pr.depth for pr in p.probes],
                )
                for p in prompts
            ],
            input_tokens=opts.input_tokens,
            max_tokens=max_tokens,
            window_s=opts.window_s,
            max_gap_s=opts.max_gap_s,
            drain_timeout_s=opts.drain_timeout_s,
            idle_timeout_s=opts.idle_timeout_s,
            kv_idle_bound=opts.kv_idle_bound,
            check_probes=opts.check_probes,
            max_model_len=max_model_len,
            engine_kv_cache_tokens=self.startup_kv_tokens,
            theoretical_full_windows=theory,
            overhead_tokens=hs.builder.overhead_tokens,
            overhead_source=hs.overhead_source,
            haystack_additive=hs.builder.additive,
        )
        return plan, prompts, hs

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        live.planned = opts.sessions
        plan, prompts, _ = self.plan()
        max_tokens = plan.max_tokens
        assert max_tokens is not None, "plan() always sets max_tokens (only a stored version-1 plan lacks it)"
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        await self.wait_until_idle(writer, opts.idle_timeout_s)
        records = [
            new_record(self.target, s.request_id, self.name, p, opts.sessions) for s, p in zip(plan.sessions, prompts)
        ]
        async with self.target.scraper(
            self.metric_names,
            interval_s=opts.sample_interval_s,
            sink=writer.metric_sample,
        ) as scraper:
            live.watch_engine(scraper.samples)
            async with StreamingClient(
                self.target.url,
                api_key=self.target.api_key,
                max_connections=opts.sessions + 4,
                **live.hooks(writer.append),
            ) as client:
                async with LiveSessions(client) as sessions:
                    live.cold_phase(opts.sessions, opts.input_tokens, plan.engine_kv_cache_tokens)
                    writer.event("sessions_start", t_ns=time.perf_counter_ns(), sessions=opts.sessions)
                    for i, (prompt, record) in enumerate(zip(prompts, records)):
                        if i and opts.stagger_s:
                            await asyncio.sleep(opts.stagger_s)
                        sessions.start(
                            session_spec(
                                self.target,
                                record.request_id,
                                prompt.text,
                                prompt.salt,
                                max_tokens,
                                seed=opts.seed,
                                use_cache_salt=opts.use_cache_salt,
                            ),
                            record,
                        )
                    stall = AdmissionStall(scraper.latest, records, opts.admission_stall_s)
                    started = await sessions.wait_first_tokens(records, opts.first_token_timeout_s, stalled=stall)
                    if stall.evidence:
                        writer.event("admission_stalled", t_ns=time.perf_counter_ns(), evidence=stall.evidence)
                    if started:
                        window_start = max(r.first_token_ns for r in records if r.first_token_ns is not None)
                        writer.event("window_start", t_ns=window_start)
                        window_end = window_start + int(opts.window_s * NS)
                        await scraper.sample()
                        live.window("window", window_start, window_end, records)  # the cold phase's last sample taken
                        await self._hold_window(sessions, records, window_end)
                        await scraper.sample()
                    cancel_ns = time.perf_counter_ns()
                    writer.event("cancel", t_ns=cancel_ns)
                    live.drain()
                    await sessions.cancel()
            await self._watch_drain(scraper, cancel_ns, opts.drain_timeout_s)

    async def _hold_window(self, live: LiveSessions, records: list[RequestRecord], end_ns: int) -> None:
        while time.perf_counter_ns() < end_ns:
            if live.ended(records):
                return  # a stream ended inside the window: the verdict will show which and why
            await asyncio.sleep(min(0.1, max(0.0, (end_ns - time.perf_counter_ns()) / NS)))

    async def _watch_drain(self, scraper: MetricsScraper, cancel_ns: int, timeout_s: float) -> None:
        deadline = cancel_ns + int(timeout_s * NS)
        while time.perf_counter_ns() < deadline:
            sample = await scraper.sample()
            if sample is not None:
                v = sample.values
                if v.get("num_requests_running") == 0 and v.get("num_requests_waiting") == 0:
                    baseline = scraper.samples[0].values.get("kv_cache_usage_perc", 0.0)
                    if v.get("kv_cache_usage_perc", 0.0) <= baseline + self.options.kv_idle_bound:
                        return
            await asyncio.sleep(0.25)


def demo(setup: DemoSetup) -> CapacityScenario:
    """For `loadproof demo`: 4 sessions of 1,536 tokens, a 6 s window."""
    return CapacityScenario(
        setup.target,
        CapacityOptions(sessions=4, input_tokens=1536, window_s=6.0),
        startup_kv_tokens=setup.kv_cache_tokens,
    )
