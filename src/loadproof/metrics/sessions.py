"""Multi-turn session figures (docs/scenarios.md, "sessions"), as pure functions of a stored run and its plan.

Cold turns are each user's first (nothing of the conversation cached), warm turns the later ones, whose
history the engine has seen before. The engine's prefix-cache hit rate is its counters' growth over the
run; the reusable share is what a perfect prefix cache could serve: each warm turn's previous prompt.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.distribution import summarize
from loadproof.metrics.load import reported_hit_pct, succeeded
from loadproof.plans.sessions import SessionsPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S

SCENARIO = "sessions"
TTFT_STATS = ("mean", "p50", "p90", "p99", "max")


def claims_of_run(run: Any, plan: SessionsPlan) -> list[Claim]:
    records = [r for r in run.records if r.scenario == SCENARIO]
    ok = [r for r in records if succeeded(r)]
    by_user: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by_user[r.prompt_id].append(r)
    for turns in by_user.values():
        turns.sort(key=lambda r: r.batch)
    complete = sum(len(t) == plan.turns and all(succeeded(r) for r in t) for t in by_user.values())
    claims = [
        count("sessions.planned_requests", plan.users * plan.turns, "requests", "users x turns", direction="neither"),
        count("sessions.requests", len(records), "requests", "turns sent (a user stops at its first failed turn)",
              direction="neither"),
        count("sessions.failed_requests", len(records) - len(ok), "requests", "turns that failed, timed out, were "
              "cancelled or got no token", direction="lower"),
        count("sessions.completed_sessions", complete, "sessions", "users whose every turn succeeded",
              direction="higher"),
    ]
    for phase, rows in (("cold", [r for r in ok if r.batch == 0]), ("warm", [r for r in ok if r.batch > 0])):
        summary = summarize([(r.first_token_ns - r.send_ns) / NS_PER_S for r in rows])  # type: ignore[operator]
        if summary is None:
            continue
        for stat in TTFT_STATS:
            claims.append(number("sessions.ttft_s.<phase>.<stat>", summary.stat(stat), "s",
                                 f"{stat} of t_first_token - t_send over the successful {phase} turns "
                                 f"({'each user first' if phase == 'cold' else 'every later turn'}; "
                                 f"{summary.method})", 4, direction="lower", parts={"phase": phase, "stat": stat}))
    cold = summarize([(r.first_token_ns - r.send_ns) / NS_PER_S for r in ok if r.batch == 0])  # type: ignore[operator]
    warm = summarize([(r.first_token_ns - r.send_ns) / NS_PER_S for r in ok if r.batch > 0])  # type: ignore[operator]
    if cold is not None and warm is not None and cold.stat("p50") > 0:
        claims.append(number("sessions.warm_over_cold_ttft_p50", warm.stat("p50") / cold.stat("p50"), "ratio",
                             "p50 TTFT of warm turns / p50 TTFT of cold turns (below 1: the history's reuse pays)", 3,
                             direction="lower"))
    for turn in range(plan.turns):
        rows = [r for r in ok if r.batch == turn]
        ttft = summarize([(r.first_token_ns - r.send_ns) / NS_PER_S for r in rows])  # type: ignore[operator]
        if ttft is None:
            continue
        claims.append(number("sessions.turn<t>.ttft_s.p50", ttft.stat("p50"), "s", "p50 of t_first_token - t_send "
                             "over the successful turns t (0 is the first)", 4, direction="lower", parts={"t": turn}))
        context = [r.prompt_tokens for r in rows if r.prompt_tokens is not None]
        if context:
            claims.append(number("sessions.turn<t>.context_tokens_mean", sum(context) / len(context), "tokens",
                                 "mean usage.prompt_tokens of the successful turns t: the context each sent", 1,
                                 direction="neither", parts={"t": turn}))
        hit = reported_hit_pct(rows)
        if hit is not None:
            claims.append(number("sessions.turn<t>.engine_hit_pct", hit, "%", "sum of usage.prompt_tokens_details."
                                 "cached_tokens / sum of usage.prompt_tokens over the successful turns t that report "
                                 "it x 100: the engine's own prefix-cache hits, request by request", 2,
                                 direction="higher", parts={"t": turn}))
    spans = [(max(r.end_ns for r in t) - min(r.send_ns for r in t)) / NS_PER_S
             for t in by_user.values() if len(t) == plan.turns and all(succeeded(r) for r in t)]
    span = summarize(spans)
    if span is not None:
        for stat in ("mean", "p50", "max"):
            claims.append(number("sessions.session_s.<stat>", span.stat(stat), "s", f"{stat} over completed sessions "
                                 "of (the last turn's end - the first turn's send), think time included", 3,
                                 direction="lower", parts={"stat": stat}))
    asked = sum(r.prompt_tokens or 0 for r in ok)
    reusable = 0
    for turns in by_user.values():
        for before, r in zip(turns, turns[1:]):
            if succeeded(r) and succeeded(before):
                reusable += before.prompt_tokens or 0
    if asked:
        claims.append(number("sessions.prefix_hit_rate.reusable_pct", 100 * reusable / asked, "%", "sum over "
                             "successful warm turns of the same user's previous prompt_tokens / sum of prompt_tokens "
                             "of every successful turn x 100: what a prefix cache that kept every conversation could "
                             "serve (the shared system prompt's reuse across users not counted)", 2,
                             direction="neither"))
    for phase, rows in (("cold", [r for r in ok if r.batch == 0]), ("warm", [r for r in ok if r.batch > 0])):
        hit = reported_hit_pct(rows)
        if hit is not None:
            claims.append(number("sessions.engine_hit_pct.<phase>", hit, "%", "sum of usage.prompt_tokens_details."
                                 f"cached_tokens / sum of usage.prompt_tokens over the successful {phase} turns that "
                                 "report it x 100", 2, direction="higher" if phase == "warm" else "neither",
                                 parts={"phase": phase}))
    claims += engine_hit_claims(records, run.samples)
    return claims



def engine_hit_claims(records: list[RequestRecord], samples: list[EngineSample]) -> list[Claim]:
    if not records:
        return []
    start, end = min(r.send_ns for r in records if r.send_ns) if any(r.send_ns for r in records) else 0, \
        max(r.end_ns for r in records)
    ordered = sorted((s for s in samples if "prefix_cache_queries_total" in s.values and "prefix_cache_hits_total" in s.values),
                     key=lambda s: s.t_ns)
    before = [s.values for s in ordered if s.t_ns <= start]
    after = [s.values for s in ordered if s.t_ns >= end]
    if not before or not after:
        return []
    queries = after[-1]["prefix_cache_queries_total"] - before[-1]["prefix_cache_queries_total"]
    hits = after[-1]["prefix_cache_hits_total"] - before[-1]["prefix_cache_hits_total"]
    if queries <= 0:
        return []
    return [number("sessions.prefix_hit_rate.engine_pct", 100 * hits / queries, "%", "engine prefix_cache_hits_total "
                   "growth / prefix_cache_queries_total growth x 100, from the last sample at or before the first "
                   "send to the last at or after the last end", 2, direction="higher")]
