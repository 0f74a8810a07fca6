"""What the long-context scenarios (capacity, prefill, interference) share.

- the haystack builder for a target: the model's tokenizer (or, where none is given, the engine's own
  /tokenize), and the tokens the engine adds around a text (BOS, chat template), from the engine's own
  `/tokenize` or counted locally and checked on the engine (`scenarios.token_counts`, as the target's
  `token_counts` says), so a planned length is the length the engine counts;
- request bodies that keep a stream going (`ignore_eos`) and carry vLLM's `cache_salt`;
- live sessions: streams started together, watched until every one has its first token;
- the idle guard: a run that measures the engine alone first waits, within a bound, until the engine's
  own /metrics show nothing running and nothing waiting (a request left from an earlier run, or anyone
  else's traffic, would take a slot or a place in the queue and change the verdict), and fails with
  `engine busy: N running, M waiting before the run` when it does not get there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines import engines
from loadproof.errors import EngineBusy, UsageError
from loadproof.protocol.routes import request_body
from loadproof.records import RequestRecord
from loadproof.scenarios.base import Scenario, TokenizerUse
from loadproof.scenarios.options import Panel, cli
from loadproof.scenarios.target import Target
from loadproof.scenarios.token_counts import PROBE_TEXT, engine_overhead_tokens, tokens_for
from loadproof.workloads.haystack import HaystackBuilder, HaystackPrompt, Style


@dataclass
class HaystackTarget:
    target: Target
    builder: HaystackBuilder
    overhead_source: str


def haystack_target(target: Target, seed: int, probe: str = PROBE_TEXT) -> HaystackTarget:
    """The builder for `target`, its overhead measured on a text that ends as the prompts will (`probe`:
    a period, as the haystack's questions end; `PROBE_LINE` for prompts that end with a newline)."""
    tokens = tokens_for(target)
    overhead, source = engine_overhead_tokens(target, tokens, probe)
    style: Style = "chat" if target.route.conversational else "completion"
    return HaystackTarget(target, HaystackBuilder(tokens, overhead_tokens=overhead, seed=seed, style=style), source)


def session_spec(
    target: Target,
    request_id: str,
    text: str,
    salt: str,
    max_tokens: int,
    *,
    seed: int,
    use_cache_salt: bool,
    deadline_s: float | None = None,
    ignore_eos: bool = True,
) -> RequestSpec:
    extra = dict(target.extra_body)
    if use_cache_salt:
        extra["cache_salt"] = salt
    body = request_body(
        target.endpoint,
        target.model,
        text,
        max_tokens=max_tokens,
        temperature=0.0,
        seed=seed,
        ignore_eos=ignore_eos,
        extra=extra,
    )
    return RequestSpec(request_id=request_id, endpoint=target.endpoint, body=body, deadline_s=deadline_s)


def new_record(
    target: Target, request_id: str, scenario: str, prompt: HaystackPrompt, concurrency: int, **labels: Any
) -> RequestRecord:
    return RequestRecord(
        request_id=request_id,
        endpoint=target.endpoint,
        scenario=scenario,
        family=scenario,
        prompt_id=prompt.session_id,
        concurrency=concurrency,
        **labels,
    )


IDLE_POLL_S = 0.25
# the scenarios that build exact-length prompts: with the model's tokenizer, or the engine's /tokenize
EXACT_LENGTH = TokenizerUse(
    required=False,
    engine=True,
    needed=True,
    purpose="exact-length prompts (default: the engine's own /tokenize, where it has one)",
)


def idle_timeout_field() -> Any:
    """The options field of the idle guard's bound (`MetricsScenario.wait_until_idle`)."""
    return Field(
        default=120.0,
        gt=0,
        description="seconds to wait, before the run, for the engine to report "
        "0 running and 0 waiting; else fail with 'engine busy'",
        json_schema_extra=cli(panel=Panel.ENGINE),
    )


def cache_salt_field() -> Any:
    """The options field that sends vLLM's cache_salt (`--no-cache-salt` turns it off)."""
    return Field(
        default=True,
        description="send vLLM's cache_salt with each session, so no run reuses another's prefix cache",
        json_schema_extra=cli(
            "--no-cache-salt", invert=True, help="do not send vLLM's cache_salt", panel=Panel.WORKLOAD
        ),
    )


class MetricsScenario(Scenario):
    """A scenario that checks itself against the engine's /metrics, named through the engine adapter."""

    def __init__(self, target: Target, options: Any) -> None:
        super().__init__(target, options)
        self.metric_names = engines.get(target.engine).metric_names

    async def wait_until_idle(self, writer: Any, timeout_s: float) -> None:
        """Return once the engine reports 0 running and 0 waiting (an `engine_idle` event says when);
        raise EngineBusy after `timeout_s` of anything else. An engine that exposes neither gauge cannot
        be checked: the event says so and the run's own criteria will show what that costs."""
        start = time.monotonic()
        said_waiting = False
        async with self.target.scraper(self.metric_names, interval_s=None) as probe:
            while True:
                sample = probe.samples[-1] if probe.samples else None
                values = sample.values if sample else {}
                if sample is not None and not values:  # none of the engine's metrics: not the engine's source
                    if self.target.metrics.kind == "exposition":
                        raise UsageError(
                            f"the metrics at {self.target.metrics.shown} show none of the engine's: behind "
                            "`loadproof relay` they are at RELAY/engine/metrics (--engine-metrics)"
                        )
                    sample = None  # a Prometheus selector that matches nothing, or nothing scraped yet
                running, waiting = values.get("num_requests_running"), values.get("num_requests_waiting")
                waited = time.monotonic() - start
                if sample is None and probe.last_failure is not None and probe.last_failure.status in (401, 403, 404):
                    raise UsageError(
                        f"the engine's metrics at {self.target.metrics.shown} answered {probe.last_error}: "
                        "check --engine-metrics (a relay's /engine/metrics takes the API key)"
                    )
                if sample is not None and running is None and waiting is None:
                    writer.event("engine_idle", t_ns=time.perf_counter_ns(), checked=False, waited_s=round(waited, 3))
                    self.status(
                        f"engine idle: not checked (its metrics at {self.target.metrics.shown} show no running "
                        "or waiting gauge)"
                    )
                    return
                if running == 0 and waiting == 0:
                    writer.event("engine_idle", t_ns=time.perf_counter_ns(), checked=True, waited_s=round(waited, 3))
                    self.status(
                        "engine idle: 0 running, 0 waiting" + (f" after {waited:.1f} s" if said_waiting else "")
                    )
                    return
                if waited >= timeout_s:
                    if sample is None:
                        why = probe.last_error or "its selector matches none of the engine's metrics"
                        raise EngineBusy(
                            f"the engine's metrics at {self.target.metrics.shown} did not answer for "
                            f"{timeout_s:g} s before the run ({why})"
                        )
                    raise EngineBusy(
                        f"engine busy: {running or 0:g} running, {waiting or 0:g} waiting before the run "
                        f"(waited {waited:.0f} s for it to be idle)"
                    )
                if sample is not None and not said_waiting:
                    said_waiting = True
                    self.status(
                        f"waiting for the engine to be idle: {running or 0:g} running, "
                        f"{waiting or 0:g} waiting (up to {timeout_s:g} s)"
                    )
                await asyncio.sleep(IDLE_POLL_S)
                await probe.sample()


class LiveSessions:
    """Streams running together; each record fills live while its stream runs."""

    def __init__(self, client: StreamingClient) -> None:
        self.client = client
        self.records: list[RequestRecord] = []
        self.tasks: list[asyncio.Task[RequestRecord]] = []

    async def __aenter__(self) -> LiveSessions:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Whatever happened, no stream outlives the block (their records are kept as cancelled)."""
        await self.cancel()

    def start(self, spec: RequestSpec, record: RequestRecord) -> None:
        self.records.append(record)
        self.tasks.append(asyncio.create_task(self.client.stream(spec, record)))

    async def wait_first_tokens(
        self, records: list[RequestRecord], timeout_s: float, stalled: Callable[[], bool] | None = None
    ) -> bool:
        """True once every record has its first token; False if a stream ended first, time ran out,
        or `stalled()` says the engine will not admit the rest."""
        deadline = time.monotonic() + timeout_s
        tasks = self._tasks_of(records)
        while True:
            done = sum(r.first_token_ns is not None for r in records)
            if done == len(records):
                return True
            if any(t.done() and r.first_token_ns is None for t, r in zip(tasks, records)):
                return False
            if time.monotonic() > deadline or (stalled is not None and stalled()):
                return False
            await asyncio.sleep(0.05)

    def _tasks_of(self, records: list[RequestRecord]) -> list[asyncio.Task[RequestRecord]]:
        by_record = {id(r): t for t, r in zip(self.tasks, self.records)}
        return [by_record[id(r)] for r in records]

    def ended(self, records: list[RequestRecord]) -> list[RequestRecord]:
        """Those of `records` whose stream is over (finished or failed)."""
        return [r for t, r in zip(self._tasks_of(records), records) if t.done()]

    async def cancel(self, records: list[RequestRecord] | None = None) -> None:
        chosen = self.tasks if records is None else self._tasks_of(records)
        for task in chosen:
            task.cancel()
        await asyncio.gather(*chosen, return_exceptions=True)


class AdmissionStall:
    """True once the engine has kept requests waiting for `stall_s` while every running request of
    ours was already decoding: no prefill is in progress, so the rest are blocked by a sequence or KV
    limit and would wait until a session ends (with `ignore_eos`, never). A long chunked prefill keeps
    requests waiting legitimately, but then a running request has no first token yet."""

    def __init__(self, latest: Callable[[], dict[str, float]], records: list[RequestRecord], stall_s: float) -> None:
        self._latest = latest
        self._records = records
        self.stall_s = stall_s
        self._since: float | None = None
        self.evidence = ""

    def __call__(self) -> bool:
        values = self._latest()
        started = sum(r.first_token_ns is not None for r in self._records)
        waiting = values.get("num_requests_waiting", 0)
        if waiting > 0 and values.get("num_requests_running") == started < len(self._records):
            now = time.monotonic()
            self._since = self._since or now
            if now - self._since >= self.stall_s:
                kv = values.get("kv_cache_usage_perc")
                self.evidence = (
                    f"the engine kept {waiting:g} waiting for {now - self._since:.0f} s while all "
                    f"{started} running were decoding" + (f" (KV cache {kv * 100:.0f}% used)" if kv is not None else "")
                )
                return True
        else:
            self._since = None
        return False
