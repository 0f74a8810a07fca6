"""`loadproof run interference`: what does a huge new prefill do to the streams already running?

M haystack sessions generate together; their aggregate rate is measured over a window W ("before").
Then one newcomer of L_big tokens is sent; the M streams' rate is measured from its send to its first
token ("during" its prefill) and over W after that first token ("after"). Everything is cancelled, and
each of the M sessions is asked a follow-up on the same context, one at a time: now prefix-cache hits
are expected (checked per follow-up on the engine's counters) and the planted fact must come back.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from pydantic import Field

from loadproof.client import StreamingClient
from loadproof.config.base import StrictModel
from loadproof.errors import UsageError
from loadproof.plans import attach_plan
from loadproof.plans.interference import InterferencePlan, InterferenceSession, Newcomer
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Example
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.long_context import (
    EXACT_LENGTH,
    LiveSessions,
    MetricsScenario,
    cache_salt_field,
    haystack_target,
    idle_timeout_field,
    new_record,
    session_spec,
)
from loadproof.scenarios.options import SAMPLING_NEEDED, Panel, cli, needs_samples
from loadproof.store.run_dir import RunWriter
from loadproof.units import NS_PER_S as NS


class InterferenceOptions(StrictModel):
    sessions: int = Field(
        default=3,
        ge=1,
        description="M, streams already generating",
        json_schema_extra=cli(aliases=["-m"], panel=Panel.ARRIVALS),
    )
    session_tokens: int = Field(
        default=2048, ge=64, description="L_m, input tokens per session", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    newcomer_tokens: int = Field(
        default=8192,
        ge=64,
        description="L_big, input tokens of the newcomer",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    window_s: float = Field(
        default=5.0,
        gt=0,
        description="W, seconds of the before and after windows",
        json_schema_extra=cli(panel=Panel.ARRIVALS),
    )
    followup_tokens: int = Field(
        default=32, ge=4, description="tokens asked per follow-up answer", json_schema_extra=cli(hidden=True)
    )
    check_probes: bool = Field(
        default=True,
        description="score retrieval: every follow-up states its session's fact",
        json_schema_extra=cli(
            "--skip-probe-check", invert=True, help="do not score retrieval (random weights)", panel=Panel.CHECKS
        ),
    )
    first_token_timeout_s: float = Field(default=7200.0, gt=0, json_schema_extra=cli(hidden=True))
    sample_interval_s: Annotated[
        float, needs_samples("the verdict reads the engine's prefix-cache hits across each follow-up")
    ] = Field(default=0.5, ge=0, description=SAMPLING_NEEDED, json_schema_extra=cli(panel=Panel.ENGINE))
    idle_timeout_s: float = idle_timeout_field()
    use_cache_salt: bool = cache_salt_field()
    seed: int = Field(default=731, json_schema_extra=cli(hidden=True))


class InterferenceScenario(MetricsScenario):
    name = "interference"
    Options = InterferenceOptions
    summary = "M streams' rate before, during and after a new long prefill; then warm follow-ups on each session."
    examples = (
        Example(
            "4 streams of 4,096 tokens, a 32,768-token newcomer",
            "--url http://127.0.0.1:8000 -m 4 --session-tokens 4096 --newcomer-tokens 32768",
        ),
        Example(
            "Longer windows before and after, retrieval not scored (a model with random weights)",
            "--url http://127.0.0.1:8000 --window-s 10 --skip-probe-check",
        ),
    )
    tokenizer = EXACT_LENGTH
    options: InterferenceOptions

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        live.planned = 2 * opts.sessions + 1
        hs = haystack_target(self.target, opts.seed)
        max_model_len = self.target.max_model_len
        longest = max(opts.session_tokens, opts.newcomer_tokens)
        if max_model_len is not None and longest >= max_model_len:
            raise UsageError(f"{longest} input tokens do not fit the served context of {max_model_len}")
        room = (max_model_len - longest) if max_model_len else 4096
        max_tokens = min(room, 100_000)
        sessions = [hs.builder.build(f"m{i:02d}", opts.session_tokens) for i in range(opts.sessions)]
        newcomer = hs.builder.build("newcomer", opts.newcomer_tokens)
        plan = InterferencePlan(
            window_s=opts.window_s,
            session_tokens=opts.session_tokens,
            newcomer_tokens=opts.newcomer_tokens,
            check_probes=opts.check_probes,
            max_tokens=max_tokens,
            sessions=[
                InterferenceSession(
                    request_id=f"int-{p.session_id}",
                    followup_request_id=f"int-{p.session_id}-followup",
                    session_id=p.session_id,
                    salt=p.salt,
                    expected=p.asked.value,
                )
                for p in sessions
            ],
            newcomer=Newcomer(request_id="int-newcomer", salt=newcomer.salt),
            overhead_tokens=hs.builder.overhead_tokens,
            overhead_source=hs.overhead_source,
            longest_gap=True,
        )
        attach_plan(manifest, plan)
        writer.write_manifest(manifest)
        await self.wait_until_idle(writer, opts.idle_timeout_s)
        records = [
            new_record(self.target, s.request_id, self.name, p, opts.sessions, batch=0)
            for s, p in zip(plan.sessions, sessions)
        ]
        new_rec = new_record(self.target, "int-newcomer", self.name, newcomer, 1, batch=1)
        new_rec.family = "newcomer"
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
                async with LiveSessions(client) as streams:
                    live.cold_phase(opts.sessions, opts.session_tokens)
                    for prompt, record in zip(sessions, records):
                        streams.start(
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
                    if await streams.wait_first_tokens(records, opts.first_token_timeout_s):
                        before_start = max(r.first_token_ns for r in records if r.first_token_ns is not None)
                        writer.event("before_window", t_ns=before_start)
                        live.window("before window", before_start, before_start + int(opts.window_s * NS), records)
                        await _sleep_until(before_start + int(opts.window_s * NS))
                        live.window(
                            "newcomer prefill",
                            time.perf_counter_ns(),
                            None,
                            records,
                            detail=f"{opts.newcomer_tokens:,} tokens, until its first token",
                        )
                        streams.start(
                            session_spec(
                                self.target,
                                new_rec.request_id,
                                newcomer.text,
                                newcomer.salt,
                                max_tokens,
                                seed=opts.seed,
                                use_cache_salt=opts.use_cache_salt,
                            ),
                            new_rec,
                        )
                        started = await streams.wait_first_tokens([new_rec], opts.first_token_timeout_s)
                        if started and new_rec.first_token_ns is not None:  # started: it has its first token
                            after_end = new_rec.first_token_ns + int(opts.window_s * NS)
                            live.window("after window", new_rec.first_token_ns, after_end, records)
                            await _sleep_until(after_end)
                    writer.event("cancel", t_ns=time.perf_counter_ns())
                    await streams.cancel()
                live.phase("follow-ups", detail="one at a time, on each session's context")
                await asyncio.sleep(1.0)  # let the engine free the cancelled requests before the follow-ups
                for spec_info, prompt in zip(plan.sessions, sessions):
                    rec = new_record(self.target, spec_info.followup_request_id, self.name, prompt, 1, batch=2)
                    rec.family = "followup"
                    spec = session_spec(
                        self.target,
                        rec.request_id,
                        prompt.followup(),
                        prompt.salt,
                        opts.followup_tokens,
                        seed=opts.seed,
                        use_cache_salt=opts.use_cache_salt,
                        ignore_eos=False,
                    )
                    await scraper.sample()
                    await client.stream(spec, rec)
                    await scraper.sample()


async def _sleep_until(t_ns: int) -> None:
    delay = (t_ns - time.perf_counter_ns()) / NS
    if delay > 0:
        await asyncio.sleep(delay)


def demo(setup: DemoSetup) -> InterferenceScenario:
    """For `loadproof demo`: 3 sessions of 1,024 tokens, a 6,144-token newcomer, 4 s windows."""
    return InterferenceScenario(
        setup.target, InterferenceOptions(sessions=3, session_tokens=1024, newcomer_tokens=6144, window_s=4.0)
    )
