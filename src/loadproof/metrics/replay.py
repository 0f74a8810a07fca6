"""Trace replay figures (docs/scenarios.md, "replay"), as pure functions of a stored run and its plan.

Every latency, rate, SLO and engine figure is the load scenario's (`metrics.load`), computed the same way
on the replay's records and named `replay.*` instead of `load.*`. Added: the prefix-cache hit rate the
trace's shared blocks promise (`expected_hits`, from the plan's hash ids) beside the engine's own
(`prefix_cache_hits_total` / `prefix_cache_queries_total` growth over the run), and, where the plan knows
the engine's KV cache size, the expectation at that size (`metrics.prefix_cache`: LRU eviction, running
requests pinned) and which of the two expectations the engine's figure is to be read against.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadproof.metrics.agent_replay import agent_claims
from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.figures import BarPlot, Bars, LinePlot, Panel, Series, Table, thin
from loadproof.metrics.latency import succeeded
from loadproof.metrics.load import load_claims, open_loop_panels, schedule_start_ns
from loadproof.metrics.prefix_cache import (
    PrefixRequest,
    chained_keys,
    mooncake_segments,
    reported_hit_interval,
    reported_hit_pct,
    simulate,
    working_set_tokens,
)
from loadproof.plans.replay import ReplayPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, Event

SCENARIO = "replay"


def expected_hits(text_tokens: list[int], blocks: list[list[Any]], block_tokens: int) -> list[int]:
    """Each request's expected prefix-cache hit in tokens: its longest run of leading blocks that an earlier
    request carried whole behind the same blocks (an unbounded cache, trace order; a block is known by its
    id and every id before it, as the engine chains its block hashes), block_tokens each, at most its text."""
    whole: set[tuple[Any, ...]] = set()
    hits = []
    for tokens, ids in zip(text_tokens, blocks):
        k = 0
        while k < len(ids) and tuple(ids[: k + 1]) in whole:
            k += 1
        hits.append(min(k * block_tokens, tokens))
        whole.update(tuple(ids[: j + 1]) for j in range(tokens // block_tokens))
    return hits


def by_model(plan: ReplayPlan, i: int, ids: list[Any]) -> list[Any]:
    """Request i's block ids as the engine's cache tells them apart: with a model mix, by its model too (vLLM
    keys a block's hash by the LoRA adapter that computed it, so two adapters never share one)."""
    if len(plan.models) != len(plan.text_tokens):
        return ids
    return [(plan.models[i], h) for h in ids]


def renamed(claim: Claim) -> Claim:
    """A `load.*` claim as `replay.*`."""
    return dataclasses.replace(
        claim, name=SCENARIO + claim.name[len("load") :], pattern=SCENARIO + claim.pattern[len("load") :]
    )


def claims_of_run(run: Any, plan: ReplayPlan) -> list[Claim]:
    records = [r for r in run.records if r.scenario == SCENARIO]
    claims = [renamed(c) for c in load_claims(records, plan, run.events, run.samples)]
    claims.insert(
        0,
        fact(
            "replay.trace",
            f"{plan.format} trace {plan.sha256[:12]}: {plan.planned_requests} requests "
            f"from {plan.trace_rows} rows, time scale {plan.time_scale:g}, block {plan.block_tokens} "
            "tokens",
            "the trace replayed: its format, the first 12 hex digits of its sha256 (the plan "
            "has all of it and the file's name), requests, rows read, time scale, block tokens",
        ),
    )
    claims.append(
        count(
            "replay.capped_inputs",
            plan.capped_inputs,
            "requests",
            "requests whose input was cut to --max-input-tokens or the served context",
            direction="neither",
        )
    )
    if len(plan.sessions) == len(plan.text_tokens):
        claims.append(
            count(
                "replay.sessions",
                len({plan.sessions[r.batch] for r in records if 0 <= r.batch < len(plan.sessions)}),
                "sessions",
                "distinct sessions of the requests recorded (bailian, weka: the trace's; otel: the copies)",
                direction="neither",
            )
        )
    if plan.agent is not None:
        claims += agent_claims(records, plan.agent, schedule_start_ns(records, run.events))
    claims += prefix_claims(records, plan, run.events, run.samples)
    claims += bounded_claims(records, plan, claims)
    return claims


def prefix_claims(
    records: list[RequestRecord], plan: ReplayPlan, events: list[Event], samples: list[EngineSample]
) -> list[Claim]:
    sent = sorted({r.batch for r in records if r.batch is not None and 0 <= r.batch < len(plan.text_tokens)})
    claims: list[Claim] = []
    if sent:
        blocks = (
            [by_model(plan, i, ids) for i, ids in enumerate(plan.hash_ids)]
            if len(plan.hash_ids) == len(plan.text_tokens)
            else [[] for _ in plan.text_tokens]
        )
        hits = expected_hits(plan.text_tokens, blocks, plan.block_tokens)
        asked = sum(plan.text_tokens[i] + plan.overhead_tokens for i in sent)
        claims.append(
            number(
                "replay.prefix_hit_rate.expected_pct",
                100 * sum(hits[i] for i in sent) / asked,
                "%",
                "sum over requests sent of the expected hit (leading blocks an earlier request of the "
                "trace carried whole x block tokens, at most the text) / sum of their prompt tokens "
                "(text + the engine's overhead) x 100",
                2,
                direction="neither",
            )
        )
    answered = [r for r in records if succeeded(r)]
    reported = reported_hit_pct(answered)
    if reported is not None:
        claims.append(
            number(
                "replay.prefix_hit_rate.reported_pct",
                reported,
                "%",
                "sum of usage.prompt_tokens_details"
                ".cached_tokens / sum of usage.prompt_tokens over the successful requests that report it "
                "x 100: the engine's hits request by request (vLLM with --enable-prompt-tokens-details)",
                2,
                direction="higher",
                interval=reported_hit_interval(answered),
            )
        )
    t0 = schedule_start_ns(records, events)
    if not records or t0 is None:
        return claims
    end_ns = max(r.end_ns for r in records)
    ordered = sorted(
        (s for s in samples if "prefix_cache_queries_total" in s.values and "prefix_cache_hits_total" in s.values),
        key=lambda s: s.t_ns,
    )
    before = [s.values for s in ordered if s.t_ns <= t0]
    after = [s.values for s in ordered if s.t_ns >= end_ns]
    if before and after:
        queries = after[-1]["prefix_cache_queries_total"] - before[-1]["prefix_cache_queries_total"]
        hits_grown = after[-1]["prefix_cache_hits_total"] - before[-1]["prefix_cache_hits_total"]
        claims.append(
            count(
                "replay.engine_prefix_cache_queries",
                int(round(queries)),
                "tokens",
                "growth of "
                "prefix_cache_queries_total from the last sample at or before the schedule's start to the "
                "last at or after the last response's end",
                direction="neither",
            )
        )
        claims.append(
            count(
                "replay.engine_prefix_cache_hits",
                int(round(hits_grown)),
                "tokens",
                "growth of prefix_cache_hits_total over the same samples",
                direction="higher",
            )
        )
        if queries > 0:
            claims.append(
                number(
                    "replay.prefix_hit_rate.engine_pct",
                    100 * hits_grown / queries,
                    "%",
                    "engine prefix_cache_hits_total growth / prefix_cache_queries_total growth x 100, "
                    "from the last sample at or before the schedule's start to the last at or after the "
                    "last response's end",
                    2,
                    direction="higher",
                )
            )
    return claims


def cache_requests(records: list[RequestRecord], plan: ReplayPlan) -> list[PrefixRequest]:
    """The requests the engine prefilled (those with a first token; one cancelled while it waited never held
    a block), in send order, as its cache sees them: each prompt's full KV blocks keyed by the trace's hash
    ids before them (the engine's overhead taken as leading every prompt), the time the engine took it up
    (its first token: the engine looks a request up when it schedules it, first come first served, and a
    queued request's send would be too early) and its end, its output tokens (those it got; else asked)."""
    kv = plan.kv_block_tokens or plan.block_tokens
    return [cache_request(r, plan, kv) for r in prefilled(records, plan)]


def prefilled(records: list[RequestRecord], plan: ReplayPlan) -> list[RequestRecord]:
    """The records of the plan's requests that got a first token, in send order."""
    return sorted(
        (
            r
            for r in records
            if r.batch is not None and 0 <= r.batch < len(plan.text_tokens) and r.first_token_ns is not None
        ),
        key=lambda r: (r.send_ns, r.batch),
    )


def cache_request(r: RequestRecord, plan: ReplayPlan, kv_block_tokens: int) -> PrefixRequest:
    """One prefilled request as a cache of `kv_block_tokens` a block sees it (`cache_requests`)."""
    i = r.batch or 0
    text = plan.text_tokens[i]
    ids: list[Any] = (
        by_model(plan, i, plan.hash_ids[i])
        if len(plan.hash_ids) == len(plan.text_tokens)
        else [f"r{i}.{j}" for j in range(-(-text // plan.block_tokens))]
    )
    keys = chained_keys(mooncake_segments(text, ids, plan.block_tokens, plan.overhead_tokens), kv_block_tokens)
    output = r.output_tokens if r.output_tokens is not None else (r.planned_output_tokens or 0)
    start = r.first_token_ns if r.first_token_ns is not None else r.send_ns  # taken up first come first served
    return PrefixRequest(start, max(r.end_ns, start), keys, text + plan.overhead_tokens, output)


def bounded_claims(records: list[RequestRecord], plan: ReplayPlan, claims: list[Claim]) -> list[Claim]:
    """The expectation at the engine's KV cache size beside the unbounded one, and which to read the
    engine's rate against (docs/scenarios.md, "replay", "The expectation at the engine's size")."""
    if not plan.kv_blocks or not plan.kv_block_tokens:
        return []
    reqs = cache_requests(records, plan)
    asked = sum(r.prompt_tokens for r in reqs)
    if not asked:
        return []
    kv, usable = plan.kv_block_tokens, max(0, plan.kv_blocks - 1) * plan.kv_block_tokens
    bounded = simulate(reqs, plan.kv_blocks, kv)
    unbounded = simulate(reqs, None, kv)
    working = working_set_tokens(reqs, kv)
    out = [
        fact(
            "replay.prefix_cache.size",
            f"{plan.kv_blocks} blocks x {kv} tokens ({usable:,} usable tokens, "
            f"source: {plan.kv_source}); the trace's prompt blocks {working:,} tokens "
            f"({working / usable if usable else float('inf'):.1f}x the cache)",
            "the engine's KV blocks (its null block not usable) x tokens per block, where they came from "
            "(options or the engine's /metrics cache_config_info), and the distinct full prompt blocks of the "
            "requests prefilled x tokens per block",
        ),
        count(
            "replay.prefix_cache.evictions",
            bounded.evictions,
            "blocks",
            "cached blocks the model of the engine's cache evicted to make room (least recently used first)",
            direction="neither",
        ),
        number(
            "replay.prefix_hit_rate.bounded_pct",
            100 * sum(bounded.hits) / asked,
            "%",
            "sum over the requests prefilled (a first token) of the hit an LRU cache of the engine's size "
            "would give (in send order; running requests' blocks pinned; whole KV blocks; the last prompt "
            "token computed) / sum of their prompt tokens (text + the engine's overhead) x 100",
            2,
            direction="neither",
        ),
        number(
            "replay.prefix_hit_rate.unbounded_blocks_pct",
            100 * sum(unbounded.hits) / asked,
            "%",
            "the same with nothing ever evicted: the unbounded expectation in the engine's whole KV blocks",
            2,
            direction="neither",
        ),
    ]
    exceeds = working > usable
    against = "bounded" if exceeds else "unbounded"
    reference = next((c for c in claims if c.name == "replay.prefix_hit_rate.expected_pct"), None)
    reference_value = 100 * sum(bounded.hits) / asked if exceeds else (reference.value if reference else None)
    out.append(
        fact(
            "replay.prefix_hit_rate.read_against",
            against,
            "bounded where the trace's prompt blocks "
            "exceed the engine's usable KV tokens (eviction must cost hits), else unbounded (expected_pct)",
        )
    )
    engine = next((c for c in claims if c.name == "replay.prefix_hit_rate.engine_pct"), None)
    if engine is not None and isinstance(reference_value, (int, float)):
        out.append(
            number(
                "replay.prefix_hit_rate.engine_minus_read_against_pp",
                float(engine.value) - float(reference_value),
                "pp",
                "engine_pct - the expectation read against (bounded_pct or expected_pct)",
                2,
                direction="neither",
            )
        )
    return out


def figures(run: Any, plan: ReplayPlan, claims: list[Claim]) -> list[Panel]:
    """The prefix cache: the engine's hit rates beside the unbounded and bounded expectations, and which one
    its figure is to be read against (report.md and the console); for report.html, the open-loop panels a load
    run has (`metrics.load.open_loop_panels`, named replay.*), the hit rates as bars, and the expected and
    reported hit rates as the trace went on."""
    records = [r for r in run.records if r.scenario == SCENARIO]
    return (
        prefix_table(claims)
        + open_loop_panels(records, run.events, run.samples, claims, plan.slo, SCENARIO)
        + prefix_panels(records, plan, claims)
    )


HIT_BARS = (
    ("expected, unbounded", "replay.prefix_hit_rate.expected_pct"),
    ("expected, the engine's size", "replay.prefix_hit_rate.bounded_pct"),
    ("the engine's counters", "replay.prefix_hit_rate.engine_pct"),
    ("the responses' cached tokens", "replay.prefix_hit_rate.reported_pct"),
)


def prefix_panels(records: list[RequestRecord], plan: ReplayPlan, claims: list[Claim]) -> list[Panel]:
    """The run's hit rates beside the expectations (bars), and, request by request in the trace's order, the
    expected hits and the responses' cached tokens so far over the prompt tokens so far."""
    by_name = {c.name: c for c in claims}
    shown = [(label, float(by_name[name].value)) for label, name in HIT_BARS if name in by_name]
    out: list[Panel] = []
    if len(shown) >= 2:
        out.append(
            BarPlot(
                title="Prefix-cache hits: the engine against the expectations",
                key="prefix-hits",
                groups=[label for label, _ in shown],
                series=[Bars("hit rate, % of prompt tokens", [value for _, value in shown])],
                y_label="% of prompt tokens",
                half=True,
                caption="The expected hit rates (an unbounded cache; one of the engine's size, where known) and the "
                "engine's (its counters' growth; the responses' cached tokens): replay.prefix_hit_rate.*.",
            )
        )
    sent = sorted(
        (r for r in records if r.batch is not None and 0 <= r.batch < len(plan.text_tokens)), key=lambda r: r.batch
    )
    if len(sent) < 2 or len(plan.hash_ids) != len(plan.text_tokens):
        return out
    hits = expected_hits(
        plan.text_tokens, [by_model(plan, i, ids) for i, ids in enumerate(plan.hash_ids)], plan.block_tokens
    )
    expected, reported = [], []
    hit_sum = prompt_sum = cached_sum = reported_prompts = 0
    for n, r in enumerate(sent, 1):
        i = r.batch or 0
        hit_sum += hits[i]
        prompt_sum += plan.text_tokens[i] + plan.overhead_tokens
        expected.append((float(n), 100 * hit_sum / prompt_sum))
        if succeeded(r) and r.cached_tokens is not None and r.prompt_tokens:
            cached_sum += r.cached_tokens
            reported_prompts += r.prompt_tokens
            reported.append((float(n), 100 * cached_sum / reported_prompts))
    out.append(
        LinePlot(
            title="Prefix-cache hits as the trace went on",
            key="prefix-hits-over-trace",
            series=[
                Series("expected, unbounded", thin(expected)),
                Series("the responses' cached tokens", thin(reported)),
            ],
            x_label="requests of the trace sent, in its order",
            y_label="hits so far, % of prompt tokens so far",
            half=True,
            caption="After each request: the expected hits (leading blocks an earlier request carried whole) and the "
            "engine's reported cached tokens, each summed so far over the prompt tokens so far.",
        )
    )
    return out


def prefix_table(claims: list[Claim]) -> list[Panel]:
    """The prefix cache's table (report.md and the console)."""
    by_name = {c.name: c for c in claims}
    shown = [
        (name, label)
        for name, label in (
            ("replay.prefix_hit_rate.expected_pct", "expected, unbounded cache (trace blocks)"),
            ("replay.prefix_hit_rate.unbounded_blocks_pct", "expected, unbounded cache (the engine's KV blocks)"),
            ("replay.prefix_hit_rate.bounded_pct", "expected, a cache of the engine's size (LRU, running pinned)"),
            ("replay.prefix_hit_rate.engine_pct", "the engine's counters"),
            ("replay.prefix_hit_rate.reported_pct", "the responses' cached tokens"),
            ("replay.prefix_hit_rate.engine_minus_read_against_pp", "engine - the expectation read against"),
        )
        if name in by_name
    ]
    if "replay.prefix_hit_rate.engine_pct" not in by_name and "replay.prefix_hit_rate.reported_pct" not in by_name:
        return []
    against = by_name.get("replay.prefix_hit_rate.read_against")
    size = by_name.get("replay.prefix_cache.size")
    if against is None:
        intro = [
            "The engine's KV cache size is unknown (--kv-blocks, or its /metrics cache_config_info): read its "
            "rate against the unbounded expectation, which a cache smaller than the trace's working set "
            "cannot reach."
        ]
    elif against.value == "bounded":
        intro = [
            f"Cache: {size.value if size else ''}.",
            "The trace's prompt blocks outgrow the engine's KV cache: read the engine's rate against the "
            "expectation at its size (bounded); the unbounded one is what a cache that never evicts would hit.",
        ]
    else:
        intro = [
            f"Cache: {size.value if size else ''}.",
            "The engine's KV cache holds the trace's prompt blocks: read its rate against the unbounded expectation.",
        ]
    return [
        Table(
            title="Prefix cache: the engine against the expectations",
            header=["figure", "value"],
            rows=[[label, f"{by_name[name].printed} {by_name[name].unit}"] for name, label in shown],
            intro=intro,
            console="Prefix cache",
            claims=[name for name, _ in shown],
        )
    ]
