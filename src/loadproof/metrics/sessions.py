"""Multi-turn session figures (docs/scenarios.md, "sessions"), as pure functions of a stored run and its plan.

Cold turns are each user's first (nothing of the conversation cached), warm turns the later ones, whose
history the engine has seen before. The engine's prefix-cache hit rate is its counters' growth over the
run; the reusable share is what a perfect prefix cache could serve: each warm turn's previous prompt.

The expectations (plans with the engine's block size): each turn's prompt is the shared prefix (the system
message, every user's alike) and then its user's own history, which the next turn extends; the turns, in
send order, go through `metrics.prefix_cache.simulate`, once with an unbounded cache and once with the
engine's own size (its KV cache tokens / block tokens blocks), beside the hits the engine reported.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.constraints import constraint_claims
from loadproof.metrics.distribution import summarize
from loadproof.metrics.latency import span_s, succeeded, ttft_ns
from loadproof.metrics.model_mix import model_claims
from loadproof.metrics.prefix_cache import (
    PrefixRequest,
    chained_keys,
    reported_hit_interval,
    reported_hit_pct,
    simulate,
    working_set_tokens,
)
from loadproof.metrics.prefix_checkpoints import checkpointed_hits
from loadproof.metrics.reasoning import TTFA_FORMULA, reasoning_claims
from loadproof.metrics.session_tier import expected_tier_claims, transfer_claims
from loadproof.metrics.sessions_figures import PRIME as PRIME  # the family of --prime-shared's request
from loadproof.metrics.slo import slo_claims
from loadproof.metrics.uncertainty import median_ratio_interval, stat_interval
from loadproof.plans.sessions import SessionsPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S

SCENARIO = "sessions"
TTFT_STATS = ("mean", "p50", "p90", "p99", "max")


def claims_of_run(run: Any, plan: SessionsPlan) -> list[Claim]:
    mine = [r for r in run.records if r.scenario == SCENARIO]
    records = [r for r in mine if r.family != PRIME]  # the users' turns; the priming request only warms the cache
    primed = [r for r in mine if r.family == PRIME and succeeded(r)]
    ok = [r for r in records if succeeded(r)]
    by_user: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by_user[r.prompt_id].append(r)
    for turns in by_user.values():
        turns.sort(key=lambda r: r.batch)
    complete = sum(len(t) == plan.turns and all(succeeded(r) for r in t) for t in by_user.values())
    claims = [
        count("sessions.planned_requests", plan.users * plan.turns, "requests", "users x turns", direction="neither"),
        count(
            "sessions.requests",
            len(records),
            "requests",
            "turns sent (a user stops at its first failed turn)",
            direction="neither",
        ),
        count(
            "sessions.failed_requests",
            len(records) - len(ok),
            "requests",
            "turns that failed, timed out, were cancelled or got no token",
            direction="lower",
        ),
        count(
            "sessions.completed_sessions", complete, "sessions", "users whose every turn succeeded", direction="higher"
        ),
    ]
    ttfts = {p: [ttft_ns(r) / NS_PER_S for r in ok if (r.batch > 0) == (p == "warm")] for p in ("cold", "warm")}
    for phase, values in ttfts.items():
        summary = summarize(values)
        if summary is None:
            continue
        for stat in TTFT_STATS:
            claims.append(
                number(
                    "sessions.ttft_s.<phase>.<stat>",
                    summary.stat(stat),
                    "s",
                    f"{stat} of t_first_token - t_send over the successful {phase} turns "
                    f"({'each user first' if phase == 'cold' else 'every later turn'}; "
                    f"{summary.method})",
                    4,
                    direction="lower",
                    parts={"phase": phase, "stat": stat},
                    interval=stat_interval(values, stat),
                )
            )
    cold, warm = summarize(ttfts["cold"]), summarize(ttfts["warm"])
    if cold is not None and warm is not None and cold.stat("p50") > 0:
        claims.append(
            number(
                "sessions.warm_over_cold_ttft_p50",
                warm.stat("p50") / cold.stat("p50"),
                "ratio",
                "p50 TTFT of warm turns / p50 TTFT of cold turns (below 1: the history's reuse pays)",
                3,
                direction="lower",
                interval=median_ratio_interval(ttfts["warm"], ttfts["cold"]),
            )
        )
    for turn in range(plan.turns):
        rows = [r for r in ok if r.batch == turn]
        values = [ttft_ns(r) / NS_PER_S for r in rows]
        ttft = summarize(values)
        if ttft is None:
            continue
        claims.append(
            number(
                "sessions.turn<t>.ttft_s.p50",
                ttft.stat("p50"),
                "s",
                "p50 of t_first_token - t_send over the successful turns t (0 is the first)",
                4,
                direction="lower",
                parts={"t": turn},
                interval=stat_interval(values, "p50"),
            )
        )
        context = [r.prompt_tokens for r in rows if r.prompt_tokens is not None]
        if context:
            claims.append(
                number(
                    "sessions.turn<t>.context_tokens_mean",
                    sum(context) / len(context),
                    "tokens",
                    "mean usage.prompt_tokens of the successful turns t: the context each sent",
                    1,
                    direction="neither",
                    parts={"t": turn},
                )
            )
        ttfas = [r.ttfa_ns / NS_PER_S for r in rows if r.ttfa_ns is not None]
        ttfa = summarize(ttfas)
        if ttfa is not None:
            claims.append(
                number(
                    "sessions.turn<t>.ttfa_s.p50",
                    ttfa.stat("p50"),
                    "s",
                    f"p50 of {TTFA_FORMULA}, over the successful turns t",
                    4,
                    direction="lower",
                    parts={"t": turn},
                    interval=stat_interval(ttfas, "p50"),
                )
            )
        hit = reported_hit_pct(rows)
        if hit is not None:
            claims.append(
                number(
                    "sessions.turn<t>.engine_hit_pct",
                    hit,
                    "%",
                    "sum of usage.prompt_tokens_details."
                    "cached_tokens / sum of usage.prompt_tokens over the successful turns t that report "
                    "it x 100: the engine's own prefix-cache hits, request by request",
                    2,
                    direction="higher",
                    parts={"t": turn},
                    interval=reported_hit_interval(rows),
                )
            )
    spans = [
        (max(r.end_ns for r in t) - min(r.send_ns for r in t)) / NS_PER_S
        for t in by_user.values()
        if len(t) == plan.turns and all(succeeded(r) for r in t)
    ]
    span = summarize(spans)
    if span is not None:
        for stat in ("mean", "p50", "max"):
            claims.append(
                number(
                    "sessions.session_s.<stat>",
                    span.stat(stat),
                    "s",
                    f"{stat} over completed sessions "
                    "of (the last turn's end - the first turn's send), think time included",
                    3,
                    direction="lower",
                    parts={"stat": stat},
                    interval=stat_interval(spans, stat),
                )
            )
    asked = sum(r.prompt_tokens or 0 for r in ok)
    reusable = 0
    for turns in by_user.values():
        for before, r in zip(turns, turns[1:]):
            if succeeded(r) and succeeded(before):
                reusable += before.prompt_tokens or 0
    if asked:
        claims.append(
            number(
                "sessions.prefix_hit_rate.reusable_pct",
                100 * reusable / asked,
                "%",
                "sum over "
                "successful warm turns of the same user's previous prompt_tokens / sum of prompt_tokens "
                "of every successful turn x 100: what a prefix cache that kept every conversation could "
                "serve (the shared system prompt's reuse across users not counted)",
                2,
                direction="neither",
            )
        )
    for phase, rows in (
        ("cold", [r for r in ok if r.batch == 0]),
        ("warm", [r for r in ok if r.batch > 0]),
        ("all", ok),
    ):
        hit = reported_hit_pct(rows)
        if hit is not None:
            claims.append(
                number(
                    "sessions.engine_hit_pct.<phase>",
                    hit,
                    "%",
                    "sum of usage.prompt_tokens_details."
                    f"cached_tokens / sum of usage.prompt_tokens over the successful {phase} turns that "
                    "report it x 100",
                    2,
                    direction="neither" if phase == "cold" else "higher",
                    parts={"phase": phase},
                    interval=reported_hit_interval(rows),
                )
            )
    claims += engine_hit_claims(records, run.samples)
    claims += agent_claims(ok, plan) + expected_claims(ok, plan, primed, run.samples) + transfer_claims(ok, plan)
    claims += reasoning_claims(SCENARIO, records)
    claims += constraint_claims(SCENARIO, records, run.manifest.options)  # --tools FILE, --response-format
    claims += slo_claims(records, plan.slo, span_s(records), SCENARIO)  # --slo
    claims += model_claims(records, plan.model_mix, plan.slo, span_s(records), SCENARIO)  # --model-mix, per user
    return claims


def agent_claims(ok: list[RequestRecord], plan: SessionsPlan) -> list[Claim]:
    """The agent turns: how many there were and what came back (plans with --tool-turns)."""
    if not plan.tool_turns:
        return []
    asked = [r for r in ok if r.batch < plan.tool_turns]
    return [
        count(
            "sessions.agent.tool_turns",
            len(asked),
            "turns",
            "successful turns that asked for a tool call (turns 0 to tool_turns - 1)",
            direction="neither",
        ),
        count(
            "sessions.agent.tool_calls",
            sum(len(r.tool_calls) for r in asked),
            "calls",
            "tool calls the engine answered them with (each call's name, id and arguments joined from its deltas)",
            direction="neither",
        ),
        count(
            "sessions.agent.turns_without_call",
            sum(not r.tool_calls for r in asked),
            "turns",
            "successful tool "
            "turns answered with no tool call (text only: the completions endpoint, or an engine that did not "
            "force the call)",
            direction="lower",
        ),
    ]


def prefix_requests(ok: list[RequestRecord], plan: SessionsPlan) -> list[PrefixRequest]:
    """The successful turns in send order as the prefix cache sees them: the shared prefix (the system
    message's tokens, every user's of one model alike), then the user's own history (the rest of the prompt, a prefix of
    that user's next turn). A priming request (family `prime`) is the shared prefix and a message of its own."""
    shared = plan.shared_prefix_tokens or 0
    out = []
    for r in sorted(ok, key=lambda r: (r.send_ns, r.request_id)):
        prompt = r.prompt_tokens or 0
        own = ("prime",) if r.family == PRIME else ("user", r.prompt_id)
        # the shared prefix is one model's: vLLM keys a block by the LoRA adapter that computed it (--model-mix)
        segments = [(("shared", r.model), min(shared, prompt)), (own, prompt - min(shared, prompt))]
        out.append(
            PrefixRequest(
                send_ns=r.send_ns,
                end_ns=r.end_ns,
                keys=chained_keys(segments, plan.block_tokens or 1),
                prompt_tokens=prompt,
                output_tokens=r.output_tokens or 0,
            )
        )
    return out


def expected_claims(
    ok: list[RequestRecord],
    plan: SessionsPlan,
    primed: list[RequestRecord] | None = None,
    samples: Sequence[EngineSample] = (),
) -> list[Claim]:
    """The hits an unbounded cache and one of the engine's size would serve, per turn and in all, beside the
    engine's (plans with the engine's block size), and with a CPU tier what it should supply
    (metrics.session_tier). A successful priming request goes through the cache first (its hits are no
    turn's)."""
    block = plan.block_tokens
    ok = [r for r in ok if r.prompt_tokens]
    if block is None or not ok:
        return []
    sent = ok + [r for r in primed or () if r.prompt_tokens]
    requests = prefix_requests(sent, plan)
    ordered = sorted(sent, key=lambda r: (r.send_ns, r.request_id))
    turns = [i for i, r in enumerate(ordered) if r.family != PRIME]
    # each request's prompt tokens, in `ordered`'s order: prefix_requests sorts alike, and the cache's hits follow it
    prompts = [request.prompt_tokens for request in requests]
    caches: dict[str, int | None] = {"unbounded": None}
    if plan.kv_cache_tokens:
        caches["bounded"] = plan.kv_cache_tokens // block
    how = {
        "unbounded": "a cache that never evicts",
        "bounded": "a cache of the engine's size, kv_cache_tokens // block_tokens blocks (vLLM's LRU block pool, "
        "running requests pinned: metrics.prefix_cache)",
    }
    primer = (
        " (after the priming request, family prime, which every turn's shared prefix can hit)"
        if len(turns) < len(ordered)
        else ""
    )
    claims = []
    for cache, blocks in caches.items():
        hits = simulate(requests, blocks, block).hits
        expected = (
            f"each turn's expected hit: its leading blocks of block_tokens (the shared prefix, then its user's history) "
            f"already cached when it was sent, at most (prompt_tokens - 1) // block_tokens of them, the turns replayed "
            f"in send order through {how[cache]}{primer}"
        )
        total = f"through {how[cache]}{primer}"
        claims += hit_claims("expected_hit_pct", hits, prompts, ordered, turns, plan.turns, cache, expected, total)
        window = plan.checkpoint_window_tokens
        if window:  # a hybrid model whose sliding window the engine keeps at checkpoints (metrics.prefix_checkpoints)
            kept = checkpointed_hits(requests, hits, block, window)
            how_kept = (
                f"the expected hit (sessions.turn<t>.expected_hit_pct.<cache>) cut where a hybrid model's sliding "
                f"window of checkpoint_window_tokens ({window}) was not kept: scanning down from it, the first run of "
                f"ceil((window - 1) / block_tokens) sliding-window blocks kept ends it, blocks kept only before an "
                f"earlier turn's replay boundary ((prompt_tokens - 1) // block_tokens) and before the junction where an "
                f"earlier turn's expected hit ran past its own cut hit (metrics.prefix_checkpoints)"
            )
            claims += hit_claims(
                "checkpointed_hit_pct",
                kept,
                prompts,
                ordered,
                turns,
                plan.turns,
                cache,
                how_kept,
                f"cut so: {how_kept}",
            )
    working = working_set_tokens(requests, block)
    claims.append(
        count(
            "sessions.working_set_tokens",
            working,
            "tokens",
            "distinct full prompt blocks over the "
            "successful turns (and the priming request) x block_tokens: what an unbounded cache would "
            "end up holding",
            direction="neither",
        )
    )
    if plan.kv_cache_tokens:
        claims.append(
            fact(
                "sessions.expected_hit_pct.read_against",
                "bounded" if working > plan.kv_cache_tokens else "either",
                "bounded where sessions.working_set_tokens exceeds the engine's kv_cache_tokens (the "
                "engine must evict, and its hit rate is to be read against the bounded expectation), "
                "else either (the two agree but for running requests' pinned blocks)",
            )
        )
    return claims + expected_tier_claims(requests, turns, plan, ok, list(samples))


def hit_claims(
    stem: str,
    hits: list[int],
    prompts: list[int],
    ordered: list[RequestRecord],
    turns: list[int],
    num_turns: int,
    cache: str,
    how: str,
    total: str,
) -> list[Claim]:
    """`sessions.turn<t>.<stem>.<cache>` and `sessions.<stem>.<cache>`: the hit tokens given (in `ordered`'s order)
    over the successful turns' prompt tokens, turn by turn and over every turn."""
    claims = []
    for turn in range(num_turns):
        idx = [i for i in turns if ordered[i].batch == turn]
        if idx:
            claims.append(
                number(
                    f"sessions.turn<t>.{stem}.<cache>",
                    100 * sum(hits[i] for i in idx) / sum(prompts[i] for i in idx),
                    "%",
                    f"sum of the expected hit tokens / sum of usage.prompt_tokens over the successful turns t x 100; {how}",
                    2,
                    direction="neither",
                    parts={"t": turn, "cache": cache},
                )
            )
    claims.append(
        number(
            f"sessions.{stem}.<cache>",
            100 * sum(hits[i] for i in turns) / sum(prompts[i] for i in turns),
            "%",
            f"the same over every successful turn, {total}",
            2,
            direction="neither",
            parts={"cache": cache},
        )
    )
    return claims


def engine_hit_claims(records: list[RequestRecord], samples: list[EngineSample]) -> list[Claim]:
    if not records:
        return []
    start, end = (
        min(r.send_ns for r in records if r.send_ns) if any(r.send_ns for r in records) else 0,
        max(r.end_ns for r in records),
    )
    ordered = sorted(
        (s for s in samples if "prefix_cache_queries_total" in s.values and "prefix_cache_hits_total" in s.values),
        key=lambda s: s.t_ns,
    )
    before = [s.values for s in ordered if s.t_ns <= start]
    after = [s.values for s in ordered if s.t_ns >= end]
    if not before or not after:
        return []
    queries = after[-1]["prefix_cache_queries_total"] - before[-1]["prefix_cache_queries_total"]
    hits = after[-1]["prefix_cache_hits_total"] - before[-1]["prefix_cache_hits_total"]
    if queries <= 0:
        return []
    return [
        number(
            "sessions.prefix_hit_rate.engine_pct",
            100 * hits / queries,
            "%",
            "engine prefix_cache_hits_total "
            "growth / prefix_cache_queries_total growth x 100, from the last sample at or before the first "
            "send to the last at or after the last end",
            2,
            direction="higher",
        )
    ]
