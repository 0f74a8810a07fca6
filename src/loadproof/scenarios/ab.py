"""`loadproof run ab`: two arms compared in a randomized interleaved design, with repeats.

An arm is a target (URL, model) plus sampling settings (e.g. a: temperature=0, b: temperature=0.7; or
the same settings against two served profiles). Every round sends the same small fixed batch (the
first `num_prompts` prompts of one task family, `concurrency` at a time) once to each arm, the two
arms in a seeded random order, balanced over rounds (as many rounds start with a as with b, one more
either way when the count is odd). Interleaving spreads the machine's drift over both arms; the
rounds are the repeats the confidence interval is drawn from (`metrics.ab`).

Records: `scenario` "ab", `family` the arm ("a"/"b"), `repeat` the round, `batch` the arm's position
in its round (0 first, 1 second), `prompt_id` the prompt. The manifest's `plan` holds the arms, the
order actually used, the prompt ids, the bootstrap seed and resample count.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import AsyncExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import msgspec
from pydantic import AfterValidator, Field

from loadproof.client import RequestSpec, StreamingClient
from loadproof.config.base import StrictModel
from loadproof.config.profile import resolve_profile, resolve_profile_path
from loadproof.engines import engines
from loadproof.errors import ConfigError, UsageError
from loadproof.plans import attach_plan
from loadproof.plans.ab import ARMS, DEFAULT_RESAMPLES, AbArm, AbPlan
from loadproof.protocol.routes import GENERATING, request_body
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, Manifest
from loadproof.scenarios import scenarios
from loadproof.scenarios.base import Example, Scenario, Setup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.slo import SLO_SYNTAX, Slo
from loadproof.scenarios.options import HttpUrl, Panel, cli, one_of
from loadproof.scenarios.recording import Console
from loadproof.scenarios.target import Target, resolve_target
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.server_metrics import MetricsScraper
from loadproof.workloads.prompts import FAMILIES, Prompt, load_family

# request-body keys an arm may set; anything else is a typo until proven otherwise
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "max_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "ignore_eos",
)


def _sampling_keys(value: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(value) - set(SAMPLING_KEYS))
    if unknown:
        raise ValueError(f"unknown setting {', '.join(unknown)}; settings: {', '.join(SAMPLING_KEYS)}")
    return value


# an arm's sampling settings, sent in every request body of the arm (`run ab`, and `run ab --scenario`'s runs)
Settings = Annotated[dict[str, float | int | bool], AfterValidator(_sampling_keys)]


def settings_field(arm: str) -> Any:
    """`--a KEY=VALUE` / `--b KEY=VALUE` (repeatable; alias `--a-setting`)."""
    return Field(
        default_factory=dict,
        description=f"arm {arm}: a sampling setting, KEY one of " + ", ".join(SAMPLING_KEYS),
        json_schema_extra=cli(aliases=[f"--{arm}-setting"], panel=Panel.WORKLOAD),
    )


class AbOptions(StrictModel):
    family: Annotated[str, one_of(FAMILIES)] = Field(
        default="english",
        description="task family of the fixed batch: " + ", ".join(FAMILIES),
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    num_prompts: int = Field(
        default=4, ge=1, description="prompts in the batch", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    concurrency: int = Field(
        default=1,
        ge=1,
        description="requests of the batch in flight at once",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    max_tokens: int = Field(
        default=128, ge=2, description="output tokens asked per request", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    repeats: int = Field(
        default=5,
        ge=2,
        description="rounds, >= 2; each sends the batch once per arm",
        json_schema_extra=cli(aliases=["-r"], panel=Panel.ARRIVALS),
    )
    seed: int = Field(
        default=731,
        description="sampling seed, an integer: round r sends seed + r with every request (the same "
        "to both arms), unless an arm sets its own",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    order_seed: int = Field(
        default=20_240_607,
        description="seed of the random order of the arms",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    bootstrap_seed: int = Field(
        default=20_240_607,
        description="seed of the confidence interval's resampling (stored in the manifest)",
        json_schema_extra=cli(panel=Panel.CHECKS),
    )
    resamples: int = Field(default=DEFAULT_RESAMPLES, ge=100, json_schema_extra=cli(hidden=True))
    a: Settings = settings_field("a")
    b: Settings = settings_field("b")
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
        default=True, description="one unrecorded request per arm first", json_schema_extra=cli(hidden=True)
    )


def plan_order(rounds: int, rng: random.Random) -> list[list[str]]:
    """The arms' order in every round: balanced (half a-first, half b-first; a coin for the odd one), shuffled."""
    orders = [["a", "b"], ["b", "a"]] * (rounds // 2)
    if rounds % 2:
        orders.append(list(rng.choice([("a", "b"), ("b", "a")])))
    rng.shuffle(orders)
    return orders


def _profile_ref(value: Path) -> Path:
    """An arm's profile: a file, or a packaged profile's name (`loadproof profiles`), checked before anything is
    sent; kept as given."""
    try:
        resolve_profile_path(value)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return value


ProfileRef = Annotated[Path, AfterValidator(_profile_ref)]


def _unit(value: str) -> str:
    """`--scenario`: a registered scenario other than this one (`scenarios.repeats` runs it as an arm's unit)."""
    units = [name for name in scenarios.in_order() if name != AbScenario.name]
    if value not in units:
        raise ValueError("must be one of " + ", ".join(units))
    return value


class AbCommand(StrictModel):
    """Each arm's own server, profile or model, where the two differ (default: --url, --profile, --model)."""

    a_url: HttpUrl | None = Field(
        default=None, description="arm a's server (default: --url)", json_schema_extra=cli(panel=Panel.TARGET)
    )
    b_url: HttpUrl | None = Field(
        default=None, description="arm b's server (default: --url)", json_schema_extra=cli(panel=Panel.TARGET)
    )
    a_profile: ProfileRef | None = Field(
        default=None,
        description="arm a's profile TOML or packaged profile name (default: --profile)",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="PROFILE"),
    )
    b_profile: ProfileRef | None = Field(
        default=None,
        description="arm b's profile TOML or packaged profile name (default: --profile)",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="PROFILE"),
    )
    a_model: str | None = Field(
        default=None,
        description="arm a's model (default: --model)",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="NAME"),
    )
    b_model: str | None = Field(
        default=None,
        description="arm b's model (default: --model)",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="NAME"),
    )
    a_endpoint: Annotated[str, one_of(GENERATING)] | None = Field(
        default=None,
        description="arm a's route, completions, chat, responses or messages (default: --endpoint): one "
        "server's APIs on the same prompts",
        json_schema_extra=cli(panel=Panel.TARGET),
    )
    b_endpoint: Annotated[str, one_of(GENERATING)] | None = Field(
        default=None,
        description="arm b's route, completions, chat, responses or messages (default: --endpoint)",
        json_schema_extra=cli(panel=Panel.TARGET),
    )
    scenario: Annotated[str, AfterValidator(_unit)] | None = Field(
        default=None,
        description="each arm's unit a full run of `loadproof run SCENARIO` (its options beside: `run ab --scenario "
        "SCENARIO --help` lists them), --repeats runs a side in A B B A order; default: a small batch each round",
        json_schema_extra=cli(panel=Panel.SLO_SEARCH, metavar="SCENARIO"),
    )


class AbScenario(Scenario):
    name = "ab"
    Options = AbOptions
    CommandOptions = AbCommand
    summary = "Two arms (settings or servers) in a randomized interleaved design: change and 95% interval per metric."
    examples = (
        Example(
            "Temperature 0 against 0.7 on one server, 10 rounds",
            "--url http://127.0.0.1:8000 --a temperature=0 --b temperature=0.7 -r 10",
        ),
        Example(
            "Two servers, the same settings",
            "--url http://host-a:8000 --a-url http://host-a:8000 --b-url http://host-b:8000",
        ),
    )
    endpoints = GENERATING
    options: AbOptions

    def __init__(self, targets: dict[str, Target], options: AbOptions) -> None:
        super().__init__(targets["a"], options)  # the manifest's `target` is arm a's; both arms are in the plan
        self.targets = targets

    @classmethod
    def prepare(cls, setup: Setup, console: Console) -> AbScenario:
        targets, profiles = {}, {}
        for arm in ARMS:
            command = setup.command
            arm_profile = getattr(command, f"{arm}_profile")
            profile = resolve_profile(arm_profile) if arm_profile is not None else setup.profile
            targets[arm] = resolve_target(
                setup.target_options,
                profile,
                url=getattr(command, f"{arm}_url"),
                model=getattr(command, f"{arm}_model"),
            )
            if targets[arm].fleet is not None:  # each arm's rows are tagged by the arm: one engine's each
                raise UsageError(f"run ab measures one engine an arm: arm {arm}'s metrics name a fleet (docs/fleet.md)")
            endpoint = getattr(command, f"{arm}_endpoint")
            if endpoint is not None:  # the arm's own API, over the same server and model
                targets[arm] = replace(targets[arm], endpoint=endpoint)
            if getattr(setup.options, arm).get("ignore_eos") and not targets[arm].route.forces_length:
                raise UsageError(
                    f"--{arm} ignore_eos: arm {arm}'s {targets[arm].endpoint} endpoint cannot hold an answer to "
                    "its max_tokens (the engine takes no ignore_eos there)"
                )
            profiles[arm] = profile.model_dump() if profile else None
        if targets["a"] == targets["b"] and setup.options.a == setup.options.b:
            console.say("note: the two arms are identical (an A/A run): the interval should include 0")
        # each arm's profile instead of one (the price, where given, stays)
        setup.manifest_extra = msgspec.structs.replace(setup.manifest_extra, profile=None, profiles=profiles)
        return cls(targets, setup.options)

    def settings(self, arm: str) -> dict[str, Any]:
        return dict(getattr(self.options, arm))

    def manifest_plan(self, order: list[list[str]], prompts: list[Prompt]) -> AbPlan:
        opts = self.options
        return AbPlan(
            arms={arm: AbArm(target=self.targets[arm].describe(), settings=self.settings(arm)) for arm in ARMS},
            order=order,
            order_seed=opts.order_seed,
            prompts=[p.id for p in prompts],
            family=opts.family,
            bootstrap_seed=opts.bootstrap_seed,
            resamples=opts.resamples,
            labels={"family": "arm", "repeat": "round", "batch": "position of the arm in its round"},
            slo=dict(opts.slo or {}),
        )

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> int:
        opts = self.options
        live = live or LiveStatus(self.name)
        order = plan_order(opts.repeats, random.Random(opts.order_seed))
        prompts = load_family(opts.family)[: opts.num_prompts]
        attach_plan(manifest, self.manifest_plan(order, prompts))
        writer.write_manifest(manifest)
        live.planned = opts.repeats * len(ARMS) * len(prompts)
        failed = 0

        def sink(record: RequestRecord) -> None:
            nonlocal failed
            if record.scenario != self.name:
                return  # warm-up requests are not measured
            writer.append(record)
            failed += not record.ok
            live.ended(record)

        async with AsyncExitStack() as stack:
            clients, scrapers = {}, {}
            for arm in ARMS:
                target = self.targets[arm]
                clients[arm] = await stack.enter_async_context(
                    StreamingClient(
                        target.url,
                        api_key=target.api_key,
                        max_connections=opts.concurrency + 4,
                        on_record=sink,
                        on_start=live.starting(self.name),
                    )
                )
                # each arm's /metrics around each of its batches (source: the arm): its draft counters per round
                scrapers[arm] = await stack.enter_async_context(
                    MetricsScraper(
                        target.metrics,
                        engines.get(target.engine).metric_names,
                        interval_s=None,
                        api_key=target.metrics_api_key,
                        sink=partial(self._sample, writer, arm),
                    )
                )
            if opts.warmup:
                for arm in ARMS:
                    await clients[arm].stream(self._spec(arm, f"warmup-{arm}", prompts[0], None))
            live.phase("requests")
            for round_index, arms in enumerate(order):
                for position, arm in enumerate(arms):
                    live.detail = f"round {round_index + 1}/{len(order)}, arm {arm}"
                    labels = {
                        "scenario": self.name,
                        "family": arm,
                        "concurrency": opts.concurrency,
                        "repeat": round_index,
                        "batch": position,
                    }
                    await scrapers[arm].sample()
                    for start in range(0, len(prompts), opts.concurrency):
                        wave = prompts[start : start + opts.concurrency]
                        specs = [
                            self._spec(arm, f"ab-r{round_index:02d}-{arm}-{start + j:03d}", p, labels)
                            for j, p in enumerate(wave)
                        ]
                        await asyncio.gather(*(clients[arm].stream(spec) for spec in specs))
                    await scrapers[arm].sample()
        return failed

    @staticmethod
    def _sample(writer: RunWriter, arm: str, sample: EngineSample) -> None:
        writer.metric_sample(msgspec.structs.replace(sample, source=arm))

    def _spec(self, arm: str, request_id: str, prompt: Prompt, labels: dict[str, Any] | None) -> RequestSpec:
        opts = self.options
        target = self.targets[arm]
        body = request_body(
            target.endpoint,
            target.model,
            prompt.text,
            max_tokens=opts.max_tokens,
            temperature=0.0,
            seed=opts.seed + (labels or {}).get("repeat", 0),
            extra={**target.extra_body, **self.settings(arm)},
        )
        return RequestSpec(
            request_id=request_id,
            endpoint=target.endpoint,
            body=body,
            deadline_s=opts.deadline_s,
            labels={**labels, "prompt_id": prompt.id} if labels else None,
        )
