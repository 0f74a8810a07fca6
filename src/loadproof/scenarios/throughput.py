"""`loadproof run throughput`: single-request decode rate and batch aggregate throughput per task family.

For each family and concurrency level N, each repeat:
- N == 1: every prompt of the family is sent alone, one after another (single-request decode rate);
- N > 1: one batch of N requests sent together, prompts taken in turn from the family (aggregate).
Requests ask for temperature 0 and a fixed seed; each record carries family, concurrency, repeat and
batch so the claims (`metrics.throughput`) are pure functions of `requests.jsonl`.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import Field, field_validator

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines import engines
from loadproof.plans import attach_plan
from loadproof.plans.throughput import ThroughputPlan
from loadproof.protocol.routes import GENERATING, request_body
from loadproof.records import RequestRecord
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Example, Scenario, TokenCounter, TokenizerUse
from loadproof.scenarios.constraints import ConstraintOptions, request_extra
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.slo import SLO_SYNTAX, Slo
from loadproof.scenarios.options import Panel, among, cli
from loadproof.store.run_dir import RunWriter
from loadproof.workloads.prompts import DEFAULT_FAMILIES, FAMILIES, Prompt, load_family


class ThroughputOptions(ConstraintOptions):  # --tools, --response-format (scenarios/constraints.py)
    families: Annotated[list[str], among(FAMILIES, "families")] = Field(
        default_factory=lambda: list(DEFAULT_FAMILIES),
        description="task families: " + ", ".join(FAMILIES),
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    concurrency: list[int] = Field(
        default_factory=lambda: [1, 4, 8],
        description="concurrency levels: requests in flight together, each >= 1",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    max_tokens: int = Field(
        default=1024, ge=2, description="output tokens asked per request", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    temperature: float = Field(default=0.0, ge=0.0, json_schema_extra=cli(hidden=True))
    repeats: int = Field(
        default=1, ge=1, description="N, repeats of every level", json_schema_extra=cli(panel=Panel.ARRIVALS)
    )
    num_prompts: int | None = Field(
        default=None,
        ge=1,
        description="prompts per family at concurrency 1",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    seed: int = Field(
        default=731,
        description="sampling seed (an integer) sent with every request",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    ignore_eos: bool = Field(
        default=False, description="generate exactly max_tokens", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    deadline_s: float | None = Field(
        default=None, gt=0, description="per-request deadline in seconds", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    slo: Slo | None = Field(
        default=None,
        description=f"per-request SLOs: which requests are good, for goodput and "
        f"the energy and cost per good token: {SLO_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.SLO_SEARCH, metavar="NAME=VALUE,..."),
    )
    warmup: bool = Field(
        default=True,
        description="one unrecorded request first, so start-up costs are not measured",
        json_schema_extra=cli(hidden=True),
    )

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, value: list[int]) -> list[int]:
        if not value or any(c < 1 for c in value):
            raise ValueError("concurrency levels must be whole numbers >= 1")
        return value


def plan(options: ThroughputOptions) -> list[list[tuple[Prompt, dict[str, Any]]]]:
    """The waves of requests in order: each wave is sent together and awaited before the next."""
    waves = []
    for family in options.families:
        prompts = load_family(family)
        singles = prompts[: options.num_prompts] if options.num_prompts else prompts
        for conc in options.concurrency:
            for repeat in range(options.repeats):
                if conc == 1:
                    for i, prompt in enumerate(singles):
                        waves.append([(prompt, _labels(family, conc, repeat, i))])
                else:
                    wave = [
                        (prompts[(repeat * conc + j) % len(prompts)], _labels(family, conc, repeat, 0))
                        for j in range(conc)
                    ]
                    waves.append(wave)
    return waves


def _labels(family: str, conc: int, repeat: int, batch: int) -> dict[str, Any]:
    return {"scenario": "throughput", "family": family, "concurrency": conc, "repeat": repeat, "batch": batch}


class ThroughputScenario(Scenario):
    name = "throughput"
    Options = ThroughputOptions
    summary = "Single-request decode rate and batch aggregate throughput per task family."
    examples = (
        Example("Every family at concurrency 1, 4 and 8, 1,024 output tokens each", "--url http://127.0.0.1:8000"),
        Example(
            "English prompts alone, 128 output tokens, at concurrency 1 and 16, three repeats",
            "--url http://127.0.0.1:8000 --families english --max-tokens 128 --concurrency 1,16 --repeats 3",
        ),
    )
    tokenizer = TokenizerUse(required=False, purpose="to re-count output")
    endpoints = GENERATING  # the Responses and Messages APIs too
    options: ThroughputOptions

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> int:
        """Send every wave; append each record as it ends. Returns the number of failed requests."""
        opts = self.options
        live = live or LiveStatus(self.name)
        counter = TokenCounter(self.target.tokenizer_path) if self.target.tokenizer_path else None
        constraint = opts.constraint(self.target.endpoint)  # --tools, --response-format: chat only, checked first
        waves = plan(opts)
        attach_plan(
            manifest,
            ThroughputPlan(
                families=opts.families,
                concurrency=opts.concurrency,
                max_tokens=opts.max_tokens,
                num_prompts=opts.num_prompts,
                repeats=opts.repeats,
                temperature=opts.temperature,
                ignore_eos=opts.ignore_eos,
                seed=opts.seed,
                slo=dict(opts.slo or {}),
                steady_window=True,  # metrics.steady_state: each level's steady window
            ),
        )
        writer.write_manifest(manifest)
        live.planned = sum(len(w) for w in waves)
        failed = 0

        def sink(record: RequestRecord) -> None:
            nonlocal failed
            if record.scenario != self.name:
                return  # the warm-up request is not measured
            if constraint is not None:
                constraint.check(record)
            if counter is not None:
                counter(record)
            writer.append(record)
            failed += not record.ok
            live.ended(record)

        max_conc = max(opts.concurrency)
        async with StreamingClient(
            self.target.url,
            api_key=self.target.api_key,
            max_connections=max_conc + 4,
            on_record=sink,
            on_start=live.starting(self.name),
        ) as client:
            if opts.warmup:
                await client.stream(self._spec("warmup", load_family(opts.families[0])[0], {}))
            # /metrics before and after the measured waves (not the warm-up), so the engine's own token
            # counters and TTFT histogram can be set beside the client's (metrics/engine_agreement.py)
            metric_names = engines.get(self.target.engine).metric_names
            async with self.target.scraper(
                metric_names,
                interval_s=None,
                sink=writer.metric_sample,
            ) as scraper:
                live.phase("requests")
                for wave_index, wave in enumerate(waves):
                    level = wave[0][1]
                    live.detail = f"{level['family']}, concurrency {level['concurrency']}"
                    specs = [
                        self._spec(f"tp-{wave_index:04d}-{j}", prompt, labels)
                        for j, (prompt, labels) in enumerate(wave)
                    ]
                    await asyncio.gather(*(client.stream(spec) for spec in specs))
                    following = waves[wave_index + 1][0][1] if wave_index + 1 < len(waves) else level
                    if (following["family"], following["concurrency"]) != (level["family"], level["concurrency"]):
                        await scraper.sample()  # a level's own counters (speculative decoding: metrics.spec_decode)
        return failed

    def _spec(self, request_id: str, prompt: Prompt, labels: dict[str, Any]) -> RequestSpec:
        opts = self.options
        body = request_body(
            self.target.endpoint,
            self.target.model,
            prompt.text,
            max_tokens=opts.max_tokens,
            temperature=opts.temperature,
            seed=opts.seed,
            ignore_eos=opts.ignore_eos,
            extra=request_extra(opts, self.target),
        )
        return RequestSpec(
            request_id=request_id,
            endpoint=self.target.endpoint,
            body=body,
            deadline_s=opts.deadline_s,
            labels={**labels, "prompt_id": prompt.id} if labels else None,
        )


def demo(setup: DemoSetup) -> ThroughputScenario:
    """For `loadproof demo`: 3 families x concurrency 1/4/8, the demo's output tokens and prompts."""
    return ThroughputScenario(setup.target, ThroughputOptions(max_tokens=setup.max_tokens, num_prompts=setup.prompts))
