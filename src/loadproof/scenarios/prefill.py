"""`loadproof run prefill`: how long does a cold prompt of L tokens wait for its first token?

R repeats, one at a time, each freshly salted so none can reuse another's prefix cache. /metrics is
sampled right before and right after each repeat, so coldness is checked per repeat on the engine's
own prefix-cache counters. After the first token the stream runs for `decode_tokens` more tokens to
give the decode rate at that context length.
"""

from __future__ import annotations

from pydantic import Field

from loadproof.client import StreamingClient
from loadproof.config.base import StrictModel
from loadproof.plans import attach_plan
from loadproof.plans.prefill import PrefillPlan, PrefillRepeat
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Example
from loadproof.scenarios.demo import DemoSetup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.long_context import (
    EXACT_LENGTH,
    MetricsScenario,
    cache_salt_field,
    haystack_target,
    idle_timeout_field,
    new_record,
    session_spec,
)
from loadproof.scenarios.options import Panel, cli
from loadproof.store.run_dir import RunWriter


class PrefillOptions(StrictModel):
    input_tokens: int = Field(
        default=4096,
        ge=64,
        description="L, input tokens, exactly",
        json_schema_extra=cli(aliases=["-l"], panel=Panel.WORKLOAD),
    )
    repeats: int = Field(
        default=3, ge=1, description="R, cold repeats", json_schema_extra=cli(aliases=["-r"], panel=Panel.ARRIVALS)
    )
    decode_tokens: int = Field(
        default=64,
        ge=2,
        description="tokens generated after the first, >= 2",
        json_schema_extra=cli(panel=Panel.WORKLOAD),
    )
    deadline_s: float | None = Field(
        default=None, gt=0, description="per-repeat deadline in seconds", json_schema_extra=cli(panel=Panel.WORKLOAD)
    )
    idle_timeout_s: float = idle_timeout_field()
    use_cache_salt: bool = cache_salt_field()
    seed: int = Field(default=731, json_schema_extra=cli(hidden=True))


class PrefillScenario(MetricsScenario):
    name = "prefill"
    Options = PrefillOptions
    summary = "Cold time to first token of one long input, R freshly salted repeats."
    examples = (
        Example(
            "Cold time to first token of a 32,768-token prompt, 5 repeats", "--url http://127.0.0.1:8000 -l 32768 -r 5"
        ),
        Example("The default 4,096 tokens, without vLLM's cache_salt", "--url http://127.0.0.1:8000 --no-cache-salt"),
    )
    tokenizer = EXACT_LENGTH
    failure = "a repeat was not cold, not the planned length, or failed (criteria above)"
    options: PrefillOptions

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        live.planned = opts.repeats
        hs = haystack_target(self.target, opts.seed)
        prompts = [hs.builder.build(f"p{r:02d}", opts.input_tokens) for r in range(opts.repeats)]
        attach_plan(
            manifest,
            PrefillPlan(
                input_tokens=opts.input_tokens,
                repeats=[PrefillRepeat(request_id=f"prefill-{p.session_id}", salt=p.salt) for p in prompts],
                overhead_tokens=hs.builder.overhead_tokens,
                overhead_source=hs.overhead_source,
            ),
        )
        writer.write_manifest(manifest)
        await self.wait_until_idle(writer, opts.idle_timeout_s)
        async with self.target.scraper(
            self.metric_names,
            interval_s=None,
            sink=writer.metric_sample,
        ) as scraper:
            async with StreamingClient(
                self.target.url, api_key=self.target.api_key, **live.hooks(writer.append)
            ) as client:
                for r, prompt in enumerate(prompts):
                    record = new_record(self.target, f"prefill-{prompt.session_id}", self.name, prompt, 1, repeat=r)
                    spec = session_spec(
                        self.target,
                        record.request_id,
                        prompt.text,
                        prompt.salt,
                        opts.decode_tokens + 1,
                        seed=opts.seed,
                        use_cache_salt=opts.use_cache_salt,
                        deadline_s=opts.deadline_s,
                    )
                    await scraper.sample()
                    live.phase(f"repeat {r + 1}/{opts.repeats}", detail=f"{opts.input_tokens:,} tokens, cold")
                    await client.stream(spec, record)
                    await scraper.sample()


def demo(setup: DemoSetup) -> PrefillScenario:
    """For `loadproof demo`: 3 cold repeats of 4,096 tokens."""
    return PrefillScenario(setup.target, PrefillOptions(input_tokens=4096, repeats=3, decode_tokens=32))
