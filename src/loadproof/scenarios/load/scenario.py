"""`loadproof run load`: open-loop load at a request rate; latency distributions, send lag, SLO goodput.

Every intended send time is drawn up front from the seed (`load.schedule`), every prompt and body is
built before the first send (`load.synthetic`, or `load.dataset` with --dataset), and the sender
(`load.sender`) launches each request at its time without waiting for any other: the schedule never
waits for the server. The engine's /metrics are sampled throughout; with --workers or --ray-address the
schedule is sent by workers (`load.scaleout`). The claims are computed afterwards from the stored run
(`metrics.load`). With --sweep or --search rate the command is a series of such runs (`load.series`),
each one `run_load`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from loadproof.errors import UsageError
from loadproof.plans import attach_plan
from loadproof.plans.load import LoadPlan, MixedModel
from loadproof.protocol.routes import Route, route_of
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Example, Setup, TokenizerUse
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.dataset import dataset_requests
from loadproof.scenarios.load.dataset_media import check_dataset_media
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.precision import PrecisionWatch
from loadproof.scenarios.load.scaleout.parent import run_scaled_out
from loadproof.scenarios.load.schedule import Planned, describe, schedule_offsets
from loadproof.scenarios.load.sender import send_schedule
from loadproof.scenarios.load.series import rate_search_command, sweep_command
from loadproof.scenarios.load.synthetic import media_alone, media_alone_requests, synthetic_requests
from loadproof.scenarios.long_context import EXACT_LENGTH, MetricsScenario, haystack_target
from loadproof.scenarios.media_options import check_media_route, with_profile_rules
from loadproof.scenarios.recording import Console, Outcome, run_once
from loadproof.scenarios.target import Target
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.workloads.model_mix import draw_models


class LoadScenario(MetricsScenario):
    name = "load"
    Options = LoadOptions
    summary = (
        "Open-loop load at a request rate: latencies from the intended and the actual send, send lag, SLO goodput."
    )
    examples = (
        Example(
            "Poisson arrivals at 4 requests/s for 60 s, goodput against an SLO",
            "--url http://127.0.0.1:8000 --rate 4 --duration-s 60 --slo ttft=2s,tpot=50ms",
        ),
        Example(
            "The highest rate at which 99% of requests meet the SLO, each trial a real 30 s run",
            "--url http://127.0.0.1:8000 --search rate --slo ttft=2s,tpot=50ms --duration-s 30",
        ),
        Example(
            "One run per rate, prompts of 256 to 2,048 tokens: latency and goodput against rate",
            "--url http://127.0.0.1:8000 --sweep 1,2,4,8 -n 200 --input-tokens uniform:256:2048",
        ),
        Example(
            "Your own prompts (a ShareGPT file), 500 of them at 2 requests/s from 4 processes",
            "--url http://127.0.0.1:8000 --dataset sharegpt.json --rate 2 -n 500 --workers 4",
        ),
    )
    tokenizer = EXACT_LENGTH
    failure = "a precision --until-precision asked was not reached (see the criteria above)"
    endpoints = None  # every route: embeddings and rerank too (requests/s, latency, input tokens/s)
    options: LoadOptions

    @classmethod
    def check_endpoint(cls, options: LoadOptions, endpoint: str) -> None:
        check_endpoint(options, endpoint)

    @classmethod
    def tokenizer_use(cls, options: LoadOptions, route: Route) -> TokenizerUse | None:
        """Synthetic media alone (a transcription of each file) sends no text: no tokenizer, no /tokenize."""
        return None if media_alone(options, route) else cls.tokenizer

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        """One run; or, with --sweep, one run per rate; or, with --search rate, the highest rate meeting the SLO.
        The media rules `--media-tokens` does not give are the profile's (`with_profile_rules`)."""
        opts = with_profile_rules(setup.options, setup.profile, setup.options.dataset is not None)
        if opts is not setup.options:
            setup = replace(setup, options=opts)
        if setup.options.model_mix:  # a model the target does not list: one line before any run directory
            check_mix(setup.options.model_mix, setup.target)
        if setup.options.sweep is not None:
            sweep_command(setup, console, run_load)
        elif setup.options.search is not None:
            rate_search_command(setup, console, run_load)
        else:
            super().perform(setup, console)

    def plan(self) -> tuple[LoadPlan, list[Planned]]:
        """The schedule, the lengths, every prompt and body: everything before the first send."""
        opts = self.options
        offsets = schedule_offsets(opts)
        max_model_len = self.target.max_model_len
        models = mixed_models(opts.model_mix, opts.seed, self.target, len(offsets)) if opts.model_mix else None
        if media_alone(opts, self.target.route):  # no text: nothing to tokenize, no prompt builder
            plan, requests = media_alone_requests(opts, offsets, self.target, max_model_len, models)
        else:
            hs = haystack_target(self.target, opts.seed, PROBE_LINE)  # its prompts end with a line's newline
            if opts.dataset is not None:  # the user's data set instead of synthetic prompts
                plan, requests = dataset_requests(opts, offsets, hs, max_model_len, self.status, models)
            else:
                plan, requests = synthetic_requests(opts, offsets, hs, max_model_len, models)
        if opts.model_mix:
            plan.model_mix = [MixedModel(model=name, weight=weight) for name, weight in opts.model_mix.items()]
            plan.base_model = (self.target.served.models or (self.target.model,))[0]  # vLLM lists its adapters after it
        return plan, requests

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        constraint = opts.constraint(self.target.endpoint)  # --tools, --response-format: chat only, checked first
        if opts.idle_timeout_s > 0:  # the idle guard (docs/scenarios.md, "The engine is idle before the run")
            await self.wait_until_idle(writer, opts.idle_timeout_s)
        else:
            writer.event("engine_idle", t_ns=time.perf_counter_ns(), checked=False, waited_s=0.0)
            self.status(
                "engine idle: not checked (--idle-timeout-s 0: the run measures beside whatever else the engine serves)"
            )
        if opts.scaled_out:  # --workers N / --ray-address: the schedule is sent by worker processes or Ray tasks
            await run_scaled_out(self, writer, manifest, live)
            return
        started = time.perf_counter()
        plan, requests = self.plan()
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        self.status(
            f"schedule: {plan.planned_requests} requests over {plan.schedule_span_s:.1f} s "
            f"({describe(plan)}), built in {time.perf_counter() - started:.2f} s"
        )
        await send_schedule(
            self,
            writer,
            manifest,
            live,
            requests,
            plan.schedule_span_s,
            describe(plan),
            opts.max_concurrency,
            opts.sample_interval_s,
            family=self.family,
            check=constraint.check if constraint is not None else None,
            watch=PrecisionWatch(opts.until_precision, opts.slo or {}, writer, self.status)
            if opts.until_precision
            else None,
        )

    @property
    def family(self) -> str:
        """What the prompts are, as each record says: `dataset` with --dataset, else `synthetic`."""
        return "dataset" if self.options.dataset else "synthetic"


# the SLOs an embeddings request has: its answer is one body, so it has no time per output token or gap
EMBEDDINGS_SLOS = ("e2el", "e2el_from_intended")


def check_endpoint(options: LoadOptions, endpoint: str) -> None:
    """What only one kind of endpoint takes: one line (UsageError) before any run directory."""
    route = route_of(endpoint)
    check_media_route(options, route, endpoint, options.dataset is not None)
    if options.dataset is not None:  # every row's media read and checked: a bad file is one line, before the run
        check_dataset_media(options, route, endpoint)
    if not route.pooling:
        if options.inputs_per_request > 1:
            raise UsageError(f"--inputs-per-request is for --endpoint embeddings or rerank; the target's is {endpoint}")
        return
    other = [name for name in options.slo or {} if name not in EMBEDDINGS_SLOS]
    if other:
        raise UsageError(
            f"--slo {', '.join(other)}: an {endpoint} answer is one body, with no output tokens to "
            f"time; give {' or '.join(EMBEDDINGS_SLOS)}"
        )
    if options.constrained:
        raise UsageError(f"--tools and --response-format shape generated answers: not with --endpoint {endpoint}")
    if options.dataset and not route.takes_dataset:
        raise UsageError(
            f"--dataset with --endpoint {endpoint}: a row is no query with documents; {endpoint} runs on "
            "synthetic texts (--input-tokens, --inputs-per-request documents a query)"
        )


def check_mix(mix: dict[str, float], target: Target) -> None:
    """A model of `--model-mix` the target does not list at /v1/models is one line (UsageError)."""
    served = target.served.models
    unknown = [name for name in mix if served and name not in served]
    if unknown:
        raise UsageError(
            f"--model-mix names {', '.join(map(repr, unknown))}, which {target.url} does not serve; "
            f"/v1/models lists: {', '.join(served)}"
        )


def mixed_models(mix: dict[str, float], seed: int, target: Target, n: int) -> list[str]:
    """`--model-mix`: each of the n requests' model, drawn with the seed, each checked against /v1/models."""
    check_mix(mix, target)
    return draw_models(mix, n, seed)


def run_load(
    target: Target, options: LoadOptions, out: Path, console: Console, manifest_extra: Manifest | None = None
) -> Outcome:
    """One load run of `options` (a plain run: `LoadOptions.one_run` derives a sweep's point or a search's
    trial), recorded into a new directory under `out`, reported and shown. `outcome.run_path` is the
    directory, `outcome.report.claims` its claims."""
    return run_once(LoadScenario(target, options), out, console, manifest_extra)


def demo(setup: DemoSetup) -> LoadScenario:
    """For `loadproof demo`: Poisson at 2 requests/s for 15 s, 128 tokens in, 32 out, with SLOs."""
    return LoadScenario(
        setup.target,
        LoadOptions(rate=2.0, duration_s=15.0, input_tokens=128, output_tokens=32, slo="ttft=1s,tpot=100ms"),
    )
