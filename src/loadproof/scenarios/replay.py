"""`loadproof run replay`: a timed request trace replayed open loop; latencies, SLOs and prefix-cache reuse.

The trace (`workloads.traces`: Mooncake JSONL, Azure CSV, plain CSV) gives each request's send time,
input and output length, and for Mooncake the hash ids of its 512-token blocks. Each prompt is built
from its blocks (`BlockPrompts`: requests sharing a hash id share exactly that block's tokens), every
body before the first send, and the load scenario's sender (`scenarios.load.sender.OpenLoop`) sends each at its
time, never waiting for the server. The claims (`metrics.replay`) are the load scenario's, named
`replay.*`, plus the expected prefix-cache hit rate against the engine's own.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from loadproof.client import RequestSpec
from loadproof.config.base import StrictModel
from loadproof.plans import attach_plan
from loadproof.plans.load import MixedModel
from loadproof.plans.replay import ReplayPlan
from loadproof.protocol.routes import GENERATING, request_body
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Example, Setup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.options import ModelMix
from loadproof.scenarios.load.scenario import check_mix, mixed_models
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.load.sender import send_schedule
from loadproof.scenarios.load.slo import SLO_SYNTAX, Slo
from loadproof.scenarios.long_context import EXACT_LENGTH, MetricsScenario, haystack_target
from loadproof.scenarios.options import Panel, cli, idle_timeout_field, sample_interval_field
from loadproof.scenarios.recording import Console
from loadproof.scenarios.token_counts import PROBE_LINE
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.cache_config import read_cache_config
from loadproof.telemetry.server_metrics import MetricsSource
from loadproof.units import NS_PER_S
from loadproof.workloads.model_mix import MIX_SYNTAX
from loadproof.workloads.synthetic import SyntheticPrompts
from loadproof.workloads.traces import (
    HASHED,
    MOONCAKE_BLOCK,
    REPLAY_BLOCK,
    BlockPrompts,
    TraceError,
    TraceFormat,
    read_trace,
    shape,
)

REPLAY_PROBE = "0 " + PROBE_LINE  # begins as a replay prompt does (a block's head line) and ends as it does


@dataclass(frozen=True)
class CacheSize:
    """The engine's KV cache: blocks in its pool, tokens a block, and where that was read."""

    blocks: int
    block_tokens: int
    source: str


def engine_cache(source: MetricsSource, api_key: str | None) -> CacheSize | None:
    """The engine's pool from its /metrics cache_config_info (telemetry.cache_config: num_gpu_blocks and
    block_size), or None where it does not say."""
    found = read_cache_config(source, api_key)
    if found is None or found.num_blocks is None:
        return None
    return CacheSize(found.num_blocks, found.block_tokens, "metrics")


class ReplayOptions(StrictModel):
    trace: str = Field(
        description="the trace file, in --format (the shipped Mooncake slice: loadproof/data/traces/)",
        json_schema_extra=cli(panel=Panel.DATA_SET, metavar="FILE"),
    )
    format: TraceFormat = Field(
        default="mooncake",
        description="mooncake (JSONL: timestamp ms, "
        "input_length, output_length, hash_ids), bailian (JSONL: chat_id, "
        "parent_chat_id, timestamp s, input_length, output_length, type, turn, "
        "hash_ids), azure (CSV: TIMESTAMP, ContextTokens, GeneratedTokens) or csv "
        "(timestamp s, input, output)",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="replay X > 0 times faster (2: half the gaps; 0.5: twice as slow)",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    max_requests: int | None = Field(
        default=None, ge=1, description="replay at most N requests", json_schema_extra=cli(panel=Panel.ARRIVALS)
    )
    start_offset_s: float = Field(
        default=0.0,
        ge=0,
        description="start this many seconds (trace time) after the trace's first request",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    block_tokens: int | None = Field(
        default=None,
        ge=1,
        description="tokens per trace hash id as replayed "
        "(default: 512 for Mooncake, its own; 32 for Bailian, twice its 16, which a "
        "block's head line and pad need); B scales every input by B over the trace's "
        "block, keeping its sharing",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    max_input_tokens: int | None = Field(
        default=None,
        ge=2,
        description="cap each prompt at this many tokens (as the engine counts them); the served context caps it too",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        description="cap each output at this many tokens",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    max_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="at most N requests in flight; the wait for a slot shows as send lag",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    ignore_eos: bool = Field(
        default=True,
        description="generate exactly each output length (--no-ignore-eos: let the model stop)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    slo: Slo | None = Field(
        default=None,
        description=f"per-request SLOs for goodput: {SLO_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.SLO_SEARCH, metavar="NAME=VALUE,..."),
    )
    deadline_s: float = Field(
        default=600.0, gt=0, description="per-request deadline in seconds", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    skip_bad_rows: bool = Field(
        default=False,
        description="skip rows that do not parse or break the time order, "
        "counting them, instead of stopping at the first",
        json_schema_extra=cli(panel=Panel.DATA_SET),
    )
    seed: int = Field(
        default=731,
        description="seed (an integer) of the filler in each block (and of --model-mix's draws)",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    model_mix: ModelMix | None = Field(
        default=None,
        description="which model or LoRA adapter each request asks "
        f"for, drawn per request with the seed: {MIX_SYNTAX} (a prefix is shared only "
        "within one model, as vLLM keys its cache by adapter)",
        json_schema_extra=cli(text=True, panel=Panel.WORKLOAD, metavar="NAME=W,..."),
    )
    kv_blocks: int | None = Field(
        default=None,
        ge=2,
        description="the engine's KV cache in blocks (vLLM's "
        "num_gpu_blocks), for the hit rate expected at its size; default: its /metrics "
        "cache_config_info",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    kv_block_tokens: int | None = Field(
        default=None,
        ge=1,
        description="tokens per KV block of the engine (with --kv-blocks)",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )
    idle_timeout_s: float = idle_timeout_field()
    sample_interval_s: float = sample_interval_field()

    @property
    def block(self) -> int:
        """Tokens per hash id as replayed: --block-tokens, else the format's default (REPLAY_BLOCK)."""
        return self.block_tokens or REPLAY_BLOCK.get(self.format, MOONCAKE_BLOCK)

    @model_validator(mode="after")
    def _consistent(self) -> ReplayOptions:
        if not Path(self.trace).expanduser().is_file():
            raise ValueError(f"--trace {self.trace}: no such file")
        if self.format not in HASHED and self.block_tokens is not None:
            raise ValueError(
                "--block-tokens scales a trace's hash-id blocks: it applies to --format mooncake or bailian"
            )
        if (self.kv_blocks is None) != (self.kv_block_tokens is None):
            raise ValueError("--kv-blocks and --kv-block-tokens go together (the engine's cache: blocks x tokens each)")
        return self


class ReplayScenario(MetricsScenario):
    name = "replay"
    Options = ReplayOptions
    summary = (
        "Replay a timed request trace (Mooncake, Azure, CSV) open loop: latencies, SLO goodput, and the "
        "prefix-cache hit rate the trace promises against the engine's."
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
    )
    tokenizer = EXACT_LENGTH
    endpoints = GENERATING  # the Responses and Messages APIs too
    options: ReplayOptions

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        if setup.options.model_mix:  # a model the target does not list: one line before any run directory
            check_mix(setup.options.model_mix, setup.target)
        super().perform(setup, console)

    def plan(self, cache: CacheSize | None = None) -> tuple[ReplayPlan, list[Planned]]:
        opts = self.options
        read = read_trace(
            opts.trace,
            opts.format,
            start_offset_s=opts.start_offset_s,
            max_requests=opts.max_requests,
            skip_bad_rows=opts.skip_bad_rows,
        )
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
                request_id=f"replay-{k:07d}", endpoint=self.target.endpoint, body=body, deadline_s=opts.deadline_s
            )
            offset_s = (row.t_s - first) / opts.time_scale
            requests.append(
                Planned(
                    k, round(offset_s * NS_PER_S), spec, s.text_tokens + builder.overhead_tokens, s.output_tokens, model
                )
            )
        self._check_counts(texts, shaped, builder)
        plan = ReplayPlan(
            trace=opts.trace,
            format=opts.format,
            sha256=read.sha256,
            trace_rows=read.lines,
            bad_rows=read.bad_rows,
            before_offset=read.before_offset,
            time_scale=opts.time_scale,
            start_offset_s=opts.start_offset_s,
            max_requests=opts.max_requests,
            trace_span_s=round(read.rows[-1].t_s - first, 6),
            block_tokens=opts.block,
            max_input_tokens=opts.max_input_tokens,
            max_output_tokens=opts.max_output_tokens,
            capped_inputs=sum(s.capped for s in shaped),
            planned_requests=len(requests),
            schedule_span_s=round(requests[-1].offset_ns / NS_PER_S, 9),
            max_concurrency=opts.max_concurrency,
            ignore_eos=opts.ignore_eos,
            deadline_s=opts.deadline_s,
            slo=dict(opts.slo or {}),
            endpoint=self.target.endpoint,
            route=self.target.route.traits(),
            max_model_len=max_model_len,
            overhead_tokens=builder.overhead_tokens,
            overhead_source=hs.overhead_source,
            haystack_additive=builder.additive,
            lines=[r.line for r in read.rows],
            text_tokens=[s.text_tokens for s in shaped],
            hash_ids=[list(s.blocks) for s in shaped] if opts.format in HASHED else [],
            kv_blocks=cache.blocks if cache else None,
            kv_block_tokens=cache.block_tokens if cache else None,
            kv_source=cache.source if cache else None,
            model_mix=[MixedModel(model=m, weight=w) for m, w in (opts.model_mix or {}).items()],
            models=models or [],
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
        plan, requests = self.plan(cache)
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        describe = f"{plan.format} trace, x{plan.time_scale:g}" + (
            f", at most {plan.max_concurrency} in flight" if plan.max_concurrency else ""
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
        )
