"""`loadproof run replay`: a timed request trace replayed open loop; latencies, SLOs and prefix-cache reuse.

The trace (`workloads.traces`: Mooncake and Bailian JSONL, Azure CSV, plain CSV) gives each request's send time,
input and output length, and for Mooncake the hash ids of its 512-token blocks. Each prompt is built
from its blocks (`BlockPrompts`: requests sharing a hash id share exactly that block's tokens), every
body before the first send, and the load scenario's sender (`scenarios.load.sender.OpenLoop`) sends each at its
time, never waiting for the server. The claims (`metrics.replay`) are the load scenario's, named
`replay.*`, plus the expected prefix-cache hit rate against the engine's own. A recorded agent's spans
(`--format otel`) are planned and sent by `scenarios.agent_replay`, each call after the calls it waited for.
The options are `scenarios.replay_options`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from typing import Any

from loadproof.client import RequestSpec
from loadproof.errors import UsageError
from loadproof.plans import attach_plan
from loadproof.plans.load import MixedModel
from loadproof.plans.replay import ReplayPlan
from loadproof.protocol.routes import GENERATING, request_body, route_of
from loadproof.rundir import Manifest
from loadproof.scenarios.agent_replay import AgentPlanner, read_agent
from loadproof.scenarios.base import Example, Setup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.chained import Chained
from loadproof.scenarios.load.scenario import check_mix, mixed_models
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.load.sender import send_schedule
from loadproof.scenarios.long_context import EXACT_LENGTH, MetricsScenario, haystack_target
from loadproof.scenarios.recording import Console
from loadproof.scenarios.replay_cache import CacheSize, engine_cache
from loadproof.scenarios.replay_options import SESSIONS, ReplayOptions
from loadproof.scenarios.session_header import session_headers
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.units import NS_PER_S
from loadproof.workloads.synthetic import SyntheticPrompts
from loadproof.workloads.traces import BlockPrompts, TraceError, shape

__all__ = ["CacheSize", "ReplayOptions", "ReplayScenario", "engine_cache"]  # the options and the cache, here too

REPLAY_PROBE = "0 " + PROBE_LINE  # begins as a replay prompt does (a block's head line) and ends as it does


class ReplayScenario(MetricsScenario):
    name = "replay"
    Options = ReplayOptions
    summary = (
        "Replay a timed request trace (Mooncake, Bailian, Azure, CSV) open loop, or a recorded agent's spans "
        "(OpenTelemetry) in their order: latencies, SLO goodput, and the prefix-cache hit rate the trace "
        "promises against the engine's."
    )
    examples = (
        Example(
            "The shipped Mooncake slice, twice as fast",
            "--url http://127.0.0.1:8000 --trace src/loadproof/data/traces/mooncake-conversation-300.jsonl --time-scale 2",
        ),
        Example(
            "An Azure trace's first 500 requests, goodput against an SLO",
            "--url http://127.0.0.1:8000 --trace azure.csv --format azure --max-requests 500 --slo ttft=2s,tpot=50ms",
        ),
        Example(
            "A recorded agent run 8 times, a second apart, each copy's id in a header for the router",
            "--url http://127.0.0.1:8000 --trace agent.jsonl --format otel --copies 8 --copy-interval-s 1 "
            "--session-header x-session-id",
        ),
    )
    tokenizer = EXACT_LENGTH
    endpoints = GENERATING  # the Responses and Messages APIs too
    options: ReplayOptions

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        if setup.options.model_mix:  # a model the target does not list: one line before any run directory
            check_mix(setup.options.model_mix, setup.target)
        if setup.options.format == "otel":  # a bad trace: one line before any run directory
            read_agent(setup.options)
        super().perform(setup, console)

    @classmethod
    def check_endpoint(cls, options: Any, endpoint: str) -> None:
        if options.format == "otel" and not route_of(endpoint).conversational:
            raise UsageError(f"--format otel replays conversations: --endpoint {endpoint} takes no messages")

    def plan(self, cache: CacheSize | None = None) -> tuple[ReplayPlan, list[Planned]]:
        opts = self.options
        read = opts.read()
        max_model_len = self.target.max_model_len
        # every prompt begins with its first block's head line (a hash id: a digit) and ends with a newline;
        # the overhead is measured on a probe that does too (on Gemma's chat template a prompt that begins
        # with a digit takes one token more than one that begins with a letter)
        hs = haystack_target(self.target, opts.seed, REPLAY_PROBE)
        builder = hs.builder
        prompts = BlockPrompts(
            SyntheticPrompts(builder, run_salt="", seed=opts.seed),
            opts.block,
            salt=secrets.token_hex(3),
            seed=opts.seed,
        )
        shortest = prompts.shortest_block()
        if opts.block < shortest:
            raise TraceError(
                f"--block-tokens {opts.block} is shorter than a block's head line and pad "
                f"({shortest} tokens with this tokenizer)"
            )
        shaped = shape(
            read.rows,
            block_tokens=opts.block,
            overhead_tokens=builder.overhead_tokens,
            max_input_tokens=opts.max_input_tokens,
            max_output_tokens=opts.max_output_tokens,
            max_model_len=max_model_len,
            min_tail=shortest,
        )
        first = read.rows[0].t_s
        requests: list[Planned] = []
        texts = []
        models = mixed_models(opts.model_mix, opts.seed, self.target, len(read.rows)) if opts.model_mix else None
        for k, (row, s) in enumerate(zip(read.rows, shaped)):
            text = prompts.prompt(s.text_tokens, s.blocks)
            texts.append(text)
            model = models[k] if models else ""
            body = request_body(
                self.target.endpoint,
                model or self.target.model,
                text,
                max_tokens=s.output_tokens,
                temperature=0.0,
                ignore_eos=opts.ignore_eos,
                extra=self.target.extra_body,
            )
            spec = RequestSpec(
                request_id=f"replay-{k:07d}",
                endpoint=self.target.endpoint,
                body=body,
                deadline_s=opts.deadline_s,
                headers=session_headers(opts.session_header, row.session or f"line-{row.line}"),
            )
            offset_s = (row.t_s - first) / opts.time_scale
            requests.append(
                Planned(
                    k, round(offset_s * NS_PER_S), spec, s.text_tokens + builder.overhead_tokens, s.output_tokens, model
                )
            )
        self._check_counts(texts, shaped, builder)
        plan = ReplayPlan(
            **opts.plan_fields(read, shaped),
            planned_requests=len(requests),
            schedule_span_s=round(requests[-1].offset_ns / NS_PER_S, 9),
            ignore_eos=opts.ignore_eos,
            deadline_s=opts.deadline_s,
            endpoint=self.target.endpoint,
            route=self.target.route.traits(),
            max_model_len=max_model_len,
            overhead_tokens=builder.overhead_tokens,
            overhead_source=hs.overhead_source,
            haystack_additive=builder.additive,
            lines=[r.line for r in read.rows],
            kv_blocks=cache.blocks if cache else None,
            kv_block_tokens=cache.block_tokens if cache else None,
            kv_source=cache.source if cache else None,
            model_mix=[MixedModel(model=m, weight=w) for m, w in (opts.model_mix or {}).items()],
            models=models or [],
            sessions=[r.session or f"line-{r.line}" for r in read.rows] if opts.format in SESSIONS else [],
            session_header=opts.session_header,
        )
        if read.bad_rows:
            self.status(f"trace: {read.bad_rows} malformed rows skipped (first: {read.first_bad})")
        sessions = {r.session for r in read.rows if r.session is not None}
        if sessions:  # Bailian: what the rows replayed are, by session, turn and type
            kinds = Counter(r.kind or "?" for r in read.rows)
            self.status(
                f"trace: {len(sessions)} sessions, turns up to {max(r.turn or 1 for r in read.rows)}, types "
                + ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
            )
        return plan, requests

    async def cache_size(self) -> CacheSize | None:
        """The engine's KV cache: --kv-blocks/--kv-block-tokens, else its /metrics cache_config_info (vLLM's
        num_gpu_blocks and block_size labels), else None (the report says the bounded expectation is unknown)."""
        opts = self.options
        if opts.kv_blocks and opts.kv_block_tokens:
            return CacheSize(opts.kv_blocks, opts.kv_block_tokens, "options")
        # one short /metrics read before anything is sent, off the event loop (the live view keeps ticking)
        found = await asyncio.to_thread(engine_cache, self.target.metrics, self.target.metrics_api_key)
        if found is None:
            self.status(
                "the engine's KV cache size is unknown (no cache_config_info in its /metrics): no hit rate "
                "expected at its size; --kv-blocks N --kv-block-tokens B gives it"
            )
        return found

    @staticmethod
    def _check_counts(texts: list[str], shaped: list[Any], builder: Any) -> None:
        """Every prompt is exactly its planned length (a sample where many): else the tokenizer did not add up."""
        step = max(1, len(texts) // 64)
        picked = list(range(0, len(texts), step))
        got = builder.count_many([texts[i] for i in picked])
        for i, n in zip(picked, got):
            if n != shaped[i].text_tokens:
                raise TraceError(
                    f"request {i}: its prompt is {n} tokens, not {shaped[i].text_tokens}: this tokenizer "
                    "does not add up across block boundaries; try another --block-tokens"
                )

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        if opts.idle_timeout_s > 0:
            await self.wait_until_idle(writer, opts.idle_timeout_s)
        started = time.perf_counter()
        cache = await self.cache_size()
        sender_of = None
        if opts.format == "otel":
            schedule = AgentPlanner(self.target, opts, cache).build()
            plan, requests = schedule.plan, schedule.requests

            def sender_of(client: Any) -> Chained:
                return Chained(client, requests, schedule.deps, schedule.wait_ns, max_concurrency=opts.max_concurrency)

        else:
            plan, requests = self.plan(cache)
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        describe = f"{plan.format} trace, x{plan.time_scale:g}" + (
            f", at most {plan.max_concurrency} in flight" if plan.max_concurrency else ""
        )
        if plan.agent is not None:
            a = plan.agent
            describe += f", {a.copies} cop{'y' if a.copies == 1 else 'ies'} of {a.llm_spans} calls, pace {a.pace}"
            self.status(
                f"agent: {a.llm_spans} LLM calls, {a.tool_spans} tool calls, {a.agent_spans} agents; "
                f"{a.tokens_per_char:.3f} tokens a character (prompts {a.fit_error_pct:.1f}% from the recorded "
                f"input tokens on average{f', {a.raised_messages} messages raised to the shortest' if a.raised_messages else ''})"
            )
        self.status(
            f"schedule: {plan.planned_requests} requests over {plan.schedule_span_s:.1f} s ({describe}; "
            f"{plan.trace_span_s:.1f} s of trace), built in {time.perf_counter() - started:.2f} s"
        )
        await send_schedule(
            self,
            writer,
            manifest,
            live,
            requests,
            plan.schedule_span_s,
            describe,
            opts.max_concurrency,
            opts.sample_interval_s,
            family="trace",
            sender_of=sender_of,
        )
