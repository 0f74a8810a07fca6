"""Trace replay figures (docs/scenarios.md, "replay"), as pure functions of a stored run and its plan.

Every latency, rate, SLO and engine figure is the load scenario's (`metrics.load`), computed the same way
on the replay's records and named `replay.*` instead of `load.*`. Added: the prefix-cache hit rate the
trace's shared blocks promise (`expected_hits`, from the plan's hash ids) beside the engine's own
(`prefix_cache_hits_total` / `prefix_cache_queries_total` growth over the run).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.load import load_claims, reported_hit_pct, schedule_start_ns, succeeded
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


def renamed(claim: Claim) -> Claim:
    """A `load.*` claim as `replay.*`."""
    return dataclasses.replace(claim, name=SCENARIO + claim.name[len("load"):],
                               pattern=SCENARIO + claim.pattern[len("load"):])


def claims_of_run(run: Any, plan: ReplayPlan) -> list[Claim]:
    records = [r for r in run.records if r.scenario == SCENARIO]
    claims = [renamed(c) for c in load_claims(records, plan, run.events, run.samples)]  # type: ignore[arg-type]
    claims.insert(0, fact("replay.trace", f"{plan.format} trace {plan.sha256[:12]}: {plan.planned_requests} requests "
                          f"from {plan.trace_rows} rows, time scale {plan.time_scale:g}, block {plan.block_tokens} "
                          "tokens", "the trace replayed: its format, the first 12 hex digits of its sha256 (the plan "
                          "has all of it and the file's name), requests, rows read, time scale, block tokens"))
    claims.append(count("replay.capped_inputs", plan.capped_inputs, "requests", "requests whose input was cut to "
                        "--max-input-tokens or the served context", direction="neither"))
    claims += prefix_claims(records, plan, run.events, run.samples)
    return claims


def prefix_claims(records: list[RequestRecord], plan: ReplayPlan, events: list[Event],
                  samples: list[EngineSample]) -> list[Claim]:
    sent = sorted({r.batch for r in records if r.batch is not None and 0 <= r.batch < len(plan.text_tokens)})
    claims: list[Claim] = []
    if sent:
        blocks = plan.hash_ids if len(plan.hash_ids) == len(plan.text_tokens) else [[] for _ in plan.text_tokens]
        hits = expected_hits(plan.text_tokens, blocks, plan.block_tokens)
        asked = sum(plan.text_tokens[i] + plan.overhead_tokens for i in sent)
        claims.append(number("replay.prefix_hit_rate.expected_pct", 100 * sum(hits[i] for i in sent) / asked, "%",
                             "sum over requests sent of the expected hit (leading blocks an earlier request of the "
                             "trace carried whole x block tokens, at most the text) / sum of their prompt tokens "
                             "(text + the engine's overhead) x 100", 2, direction="neither"))
    reported = reported_hit_pct([r for r in records if succeeded(r)])
    if reported is not None:
        claims.append(number("replay.prefix_hit_rate.reported_pct", reported, "%", "sum of usage.prompt_tokens_details"
                             ".cached_tokens / sum of usage.prompt_tokens over the successful requests that report it "
                             "x 100: the engine's hits request by request (vLLM with --enable-prompt-tokens-details)",
                             2, direction="higher"))
    t0 = schedule_start_ns(records, events)
    if not records or t0 is None:
        return claims
    end_ns = max(r.end_ns for r in records)
    ordered = sorted((s for s in samples if "prefix_cache_queries_total" in s.values and "prefix_cache_hits_total" in s.values),
                     key=lambda s: s.t_ns)
    before = [s.values for s in ordered if s.t_ns <= t0]
    after = [s.values for s in ordered if s.t_ns >= end_ns]
    if before and after:
        queries = after[-1]["prefix_cache_queries_total"] - before[-1]["prefix_cache_queries_total"]
        hits_grown = after[-1]["prefix_cache_hits_total"] - before[-1]["prefix_cache_hits_total"]
        claims.append(count("replay.engine_prefix_cache_queries", int(round(queries)), "tokens", "growth of "
                            "prefix_cache_queries_total from the last sample at or before the schedule's start to the "
                            "last at or after the last response's end", direction="neither"))
        claims.append(count("replay.engine_prefix_cache_hits", int(round(hits_grown)), "tokens", "growth of "
                            "prefix_cache_hits_total over the same samples", direction="higher"))
        if queries > 0:
            claims.append(number("replay.prefix_hit_rate.engine_pct", 100 * hits_grown / queries, "%",
                                 "engine prefix_cache_hits_total growth / prefix_cache_queries_total growth x 100, "
                                 "from the last sample at or before the schedule's start to the last at or after the "
                                 "last response's end", 2, direction="higher"))
    return claims
