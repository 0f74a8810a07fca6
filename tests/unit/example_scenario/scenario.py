"""`loadproof run example`: R rounds of N requests, one after another, each timed to its first token."""

from __future__ import annotations

from pydantic import Field

from loadproof.client import RequestSpec, StreamingClient
from loadproof.config.base import StrictModel
from loadproof.plans import attach_plan
from loadproof.protocol.routes import request_body
from loadproof.rundir import Manifest
from loadproof.scenarios.base import Scenario
from loadproof.scenarios.live import LiveStatus
from loadproof.store.run_dir import RunWriter
from tests.unit.example_scenario.plan import ExamplePlan


class ExampleOptions(StrictModel):
    requests: int = Field(default=3, ge=1, description="N, requests per round")
    rounds: int = Field(default=2, ge=1, description="R, rounds")
    max_tokens: int = Field(default=8, ge=2, description="output tokens asked per request")
    prompt: str = Field(default="Say something short.", description="the prompt every request sends")


class ExampleScenario(Scenario):
    name = "example"
    Options = ExampleOptions
    summary = "R rounds of N requests, one at a time: TTFT and decode rate (an example scenario)."
    options: ExampleOptions

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus | None = None) -> None:
        opts = self.options
        live = live or LiveStatus(self.name)
        rounds = [[f"ex-{r}-{i}" for i in range(opts.requests)] for r in range(opts.rounds)]
        attach_plan(manifest, ExamplePlan(prompt=opts.prompt, max_tokens=opts.max_tokens, rounds=rounds))
        writer.write_manifest(manifest)
        live.planned = opts.requests * opts.rounds
        async with StreamingClient(self.target.url, api_key=self.target.api_key, on_record=writer.append) as client:
            for repeat, ids in enumerate(rounds):
                live.phase(f"round {repeat + 1}/{opts.rounds}")
                for request_id in ids:
                    body = request_body(
                        self.target.endpoint,
                        self.target.model,
                        opts.prompt,
                        max_tokens=opts.max_tokens,
                        ignore_eos=True,
                        extra=self.target.extra_body,
                    )
                    await client.stream(
                        RequestSpec(
                            request_id,
                            self.target.endpoint,
                            body,
                            labels={"scenario": self.name, "family": "example", "repeat": repeat},
                        )
                    )
