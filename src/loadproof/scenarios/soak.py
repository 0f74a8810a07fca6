"""`loadproof run soak`: K clients for a duration, mixed short and long requests; errors, latency drift
and the engine's (and relay's) memory over time. Bounded: no request starts after the duration, each
has a deadline, and whatever is still running a grace period later is cancelled (and recorded).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Annotated

import msgspec
from pydantic import Field

from loadproof.client import StreamingClient
from loadproof.client.stream import RequestSpec
from loadproof.config.base import StrictModel
from loadproof.errors import UsageError
from loadproof.plans import attach_plan
from loadproof.plans.soak import SoakPlan
from loadproof.protocol.routes import request_body
from loadproof.rundir import EngineSample, Manifest
from loadproof.scenarios.base import Example, Setup, TokenizerUse
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.long_context import MetricsScenario, haystack_target
from loadproof.scenarios.options import SAMPLING_NEEDED, HttpUrl, Panel, cli, needs_samples
from loadproof.scenarios.recording import Console
from loadproof.scenarios.target import Target
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.server_metrics import MetricsScraper, MetricsSource
from loadproof.units import NS_PER_S as NS
from loadproof.workloads.prompts import DEFAULT_FAMILIES, load_family

PROCESS_METRICS = {"process_rss_bytes": "process_resident_memory_bytes"}


class SoakOptions(StrictModel):
    duration_s: float = Field(
        default=300.0,
        gt=0,
        description="no request starts after this many seconds",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    clients: int = Field(
        default=4,
        ge=1,
        description="K concurrent client loops",
        json_schema_extra=cli(aliases=["-k"], panel=Panel.ARRIVALS),
    )
    long_every: int = Field(
        default=5,
        ge=0,
        description="every Nth request of a client is long (needs --tokenizer or the engine's /tokenize; 0: none)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    long_tokens: int = Field(
        default=4096, ge=64, description="input tokens of a long request", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    short_max_tokens: int = Field(default=64, ge=1, json_schema_extra=cli(hidden=True))
    long_max_tokens: int = Field(default=32, ge=1, json_schema_extra=cli(hidden=True))
    deadline_s: float = Field(
        default=600.0, gt=0, description="per-request deadline in seconds", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    grace_s: float = Field(
        default=60.0,
        ge=0,
        description="after the duration, wait this long for requests in flight",
        json_schema_extra=cli(hidden=True),
    )
    sample_interval_s: Annotated[
        float,
        needs_samples("the verdict reads the resident memory of the engine and the relay sampled through the run"),
    ] = Field(default=2.0, ge=0, description=SAMPLING_NEEDED, json_schema_extra=cli(panel=Panel.ENGINE))
    max_error_rate: float = Field(default=0.0, ge=0, le=1, json_schema_extra=cli(hidden=True))
    max_latency_drift: float = Field(
        default=0.25,
        ge=0,
        description="allowed growth of the median latency, second half over first, as a share (0.25: 25%)",
        json_schema_extra=cli(panel=Panel.CHECKS, metavar="SHARE"),
    )
    max_rss_growth_mib: float = Field(
        default=512.0,
        ge=0,
        description="allowed resident memory growth in MiB",
        json_schema_extra=cli(panel=Panel.CHECKS),
    )
    seed: int = Field(default=731, json_schema_extra=cli(hidden=True))


class SoakCommand(StrictModel):
    """Where `loadproof run soak` reads the relay's memory from (the engine's: the target's --engine-metrics)."""

    relay_metrics: HttpUrl | None = Field(
        default=None,
        description="the relay's base URL, for its memory samples",
        json_schema_extra=cli(panel=Panel.ENGINE, metavar="URL"),
    )


class SoakScenario(MetricsScenario):
    name = "soak"
    Options = SoakOptions
    CommandOptions = SoakCommand
    summary = "K clients for a duration, short and long requests mixed: errors, latency drift, memory over time."
    examples = (
        Example(
            "8 clients for an hour, every 4th request 8,192 tokens long",
            "--url http://127.0.0.1:8000 --duration-s 3600 -k 8 --long-every 4 --long-tokens 8192",
        ),
        Example(
            "Through a relay: the engine's metrics and the relay's memory",
            "--url http://127.0.0.1:8080 --engine-metrics http://127.0.0.1:8080/engine/metrics --relay-metrics http://127.0.0.1:8080",
        ),
    )
    tokenizer = TokenizerUse(
        required=False, engine=True, purpose="for long requests (default: the engine's own /tokenize, where it has one)"
    )
    options: SoakOptions

    def __init__(
        self,
        target: Target,
        options: SoakOptions,
        engine_metrics_url: str | None = None,
        relay_metrics_url: str | None = None,
    ) -> None:
        super().__init__(target, options)
        # the engine's memory: the target's metrics source, unless a base URL is given here (the demo's)
        self.engine_metrics = MetricsSource.beside(engine_metrics_url) if engine_metrics_url else target.metrics
        self.relay_metrics_url = relay_metrics_url

    @classmethod
    def prepare(cls, setup: Setup, console: Console) -> SoakScenario:
        if setup.target.fleet is not None:
            raise UsageError("run soak watches one engine's memory: give its /metrics alone as --engine-metrics")
        options = setup.options
        if options.long_every and setup.target.tokenizer_source is None:
            console.say("no --tokenizer, and the target does not count tokens (/tokenize): short requests only")
            options = options.model_copy(update={"long_every": 0})
        return cls(setup.target, options, relay_metrics_url=setup.command.relay_metrics)

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        rng = random.Random(opts.seed)
        shorts = [p for family in DEFAULT_FAMILIES for p in load_family(family)]
        builder = (
            haystack_target(self.target, opts.seed).builder
            if opts.long_every and self.target.tokenizer_source
            else None
        )
        attach_plan(
            manifest,
            SoakPlan(
                duration_s=opts.duration_s,
                clients=opts.clients,
                long_every=opts.long_every,
                long_requests=builder is not None,
                max_error_rate=opts.max_error_rate,
                max_latency_drift=opts.max_latency_drift,
                max_rss_growth_mib=opts.max_rss_growth_mib,
            ),
        )
        writer.write_manifest(manifest)
        scrapers = []

        def tagged(role: str) -> Callable[[EngineSample], None]:  # each row of metrics.jsonl says whose it read
            return lambda sample: writer.metric_sample(msgspec.structs.replace(sample, source=role))

        # the relay's /metrics takes the key its API takes (the one this run sends through it); the engine's
        # source gets it only where it is served beside the API (a relay's /engine/metrics)
        relay = MetricsSource.beside(self.relay_metrics_url) if self.relay_metrics_url else None
        engine_key = self.target.api_key if self.engine_metrics.same_origin(self.target.url) else None
        for role, source, key in (("engine", self.engine_metrics, engine_key), ("relay", relay, self.target.api_key)):
            if source is not None:
                scrapers.append(
                    MetricsScraper(
                        source, PROCESS_METRICS, interval_s=opts.sample_interval_s, api_key=key, sink=tagged(role)
                    )
                )
        start = time.monotonic()
        end = start + opts.duration_s

        async def client_loop(client: StreamingClient, k: int) -> None:
            n = 0
            while time.monotonic() < end:
                n += 1
                if builder is not None and opts.long_every and n % opts.long_every == 0:
                    prompt = builder.build(f"c{k}-{n}", opts.long_tokens)
                    text, max_tokens, family, pid = prompt.text, opts.long_max_tokens, "long", prompt.session_id
                else:
                    chosen = rng.choice(shorts)
                    text, max_tokens, family, pid = chosen.text, opts.short_max_tokens, "short", chosen.id
                body = request_body(
                    self.target.endpoint,
                    self.target.model,
                    text,
                    max_tokens=max_tokens,
                    seed=opts.seed,
                    extra=self.target.extra_body,
                )
                labels = {
                    "scenario": self.name,
                    "family": family,
                    "prompt_id": pid,
                    "batch": k,
                    "repeat": n,
                    "concurrency": opts.clients,
                }
                await client.stream(
                    RequestSpec(
                        request_id=f"soak-c{k}-{n:05d}",
                        endpoint=self.target.endpoint,
                        body=body,
                        deadline_s=opts.deadline_s,
                        labels=labels,
                    )
                )

        async with StreamingClient(
            self.target.url, api_key=self.target.api_key, max_connections=opts.clients + 4, **live.hooks(writer.append)
        ) as client:
            for scraper in scrapers:
                await scraper.__aenter__()
            if scrapers:
                live.watch_engine(scrapers[0].samples)  # the engine's (or, without one, the relay's) memory
            live.phase(
                "requests",
                end_ns=time.perf_counter_ns() + int((end - time.monotonic()) * NS),
                detail=f"{opts.clients} clients",
            )
            try:
                loops = [asyncio.create_task(client_loop(client, k)) for k in range(opts.clients)]
                _, pending = await asyncio.wait(loops, timeout=opts.duration_s + opts.grace_s)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*loops, return_exceptions=True)
            finally:
                for scraper in scrapers:
                    await scraper.__aexit__(None, None, None)


def demo(setup: DemoSetup) -> SoakScenario:
    """For `loadproof demo`: 2 clients for 20 s, every third request long."""
    return SoakScenario(
        setup.target,
        SoakOptions(duration_s=20.0, clients=2, long_every=3, long_tokens=1024, max_latency_drift=1.0),
        engine_metrics_url=setup.engine_url,
    )
