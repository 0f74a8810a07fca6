"""A sessions run's report panels (`metrics.figures`; the catalog entry's `figures`): the turn-by-turn table of context, TTFT and prefix-cache hits beside the expectations,
and for report.html the headline, those figures per turn as plots, TTFT of each request by its turn, the
engine's state over the run and the latency distributions. Presentation only: the figures are the claims'
(`metrics.sessions`) or the stored records', read with the claims' definitions.
"""

from __future__ import annotations

from typing import Any

from loadproof.metrics.claims import Claim
from loadproof.metrics.figures import LinePlot, Panel, Series, Table, headline
from loadproof.metrics.latency import succeeded, ttft_ns
from loadproof.metrics.latency_figures import distribution_panels
from loadproof.metrics.timeline import engine_panels
from loadproof.plans.sessions import SessionsPlan
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

SCENARIO = "sessions"
PRIME = "prime"  # the family of --prime-shared's request: the shared prefix sent once before the users start
HEADLINE = (
    ("TTFT p50, cold turns", "sessions.ttft_s.cold.p50"),
    ("TTFT p50, warm turns", "sessions.ttft_s.warm.p50"),
    ("warm / cold TTFT p50", "sessions.warm_over_cold_ttft_p50"),
    ("engine hits, warm turns", "sessions.engine_hit_pct.warm"),
    ("expected hits, unbounded", "sessions.expected_hit_pct.unbounded"),
    ("expected hits, the engine's size", "sessions.expected_hit_pct.bounded"),
    ("expected hits, sliding window at checkpoints", "sessions.checkpointed_hit_pct.bounded"),
    ("SLO met", "sessions.slo_attainment_pct"),
    ("failed requests", "sessions.failed_requests"),
)
HITS = (
    ("the engine (cached tokens)", "engine_hit_pct"),
    ("expected, unbounded cache", "expected_hit_pct.unbounded"),
    ("expected, the engine's size", "expected_hit_pct.bounded"),
    ("expected, sliding window at checkpoints, unbounded", "checkpointed_hit_pct.unbounded"),
    ("expected, sliding window at checkpoints, the engine's size", "checkpointed_hit_pct.bounded"),
)

TURN_COLUMNS = (
    ("context_tokens_mean", "context"),
    ("ttft_s.p50", "TTFT p50 s"),
    ("ttfa_s.p50", "answer p50 s"),
    ("engine_hit_pct", "engine hit %"),
    ("expected_hit_pct.unbounded", "unbounded %"),
    ("expected_hit_pct.bounded", "bounded %"),
    ("checkpointed_hit_pct.unbounded", "checkpointed unbounded %"),
    ("checkpointed_hit_pct.bounded", "checkpointed bounded %"),
)


def figures(run: Any, plan: SessionsPlan, claims: list[Claim]) -> list[Panel]:
    """The headline; the turn-by-turn table (report.md, the console); for report.html the hits per turn
    beside the two expectations, TTFT per turn (each request, and the median), the context per turn, the
    engine's state over the run and the TTFT, ITL and E2E distributions."""
    records = [r for r in run.records if r.scenario == SCENARIO and r.family != PRIME]
    over_run: list[Panel] = []
    sent = [r for r in records if r.send_ns]
    if sent:
        t0, end = min(r.send_ns for r in sent), max(r.end_ns for r in sent)
        over_run = engine_panels(run.samples, t0, end, "the first send") + distribution_panels(sent, SCENARIO)
    return headline(claims, HEADLINE) + turn_table(plan, claims) + turn_panels(sent, plan, claims) + over_run


def turn_table(plan: SessionsPlan, claims: list[Claim]) -> list[Panel]:
    """Turn by turn: the context, TTFT, first answer, and the engine's hits beside the two expectations
    (report.md and the console)."""
    by_name = {c.name: c for c in claims}
    columns = [
        (key, label)
        for key, label in TURN_COLUMNS
        if any(f"sessions.turn{t}.{key}" in by_name for t in range(plan.turns))
    ]
    rows = [
        [f"{t} call" if t < plan.tool_turns else str(t)]
        + [
            by_name[f"sessions.turn{t}.{key}"].printed if f"sessions.turn{t}.{key}" in by_name else "-"
            for key, _ in columns
        ]
        for t in range(plan.turns)
    ]
    if not any(key.startswith(("expected", "checkpointed")) for key, _ in columns):
        return []
    total = [
        ("engine hits, every turn", "sessions.engine_hit_pct.all"),
        ("the engine's counters", "sessions.prefix_hit_rate.engine_pct"),
        ("expected, unbounded", "sessions.expected_hit_pct.unbounded"),
        ("expected, the engine's size", "sessions.expected_hit_pct.bounded"),
        ("checkpointed, unbounded", "sessions.checkpointed_hit_pct.unbounded"),
        ("checkpointed, the engine's size", "sessions.checkpointed_hit_pct.bounded"),
    ]
    against = by_name.get("sessions.expected_hit_pct.read_against")
    intro = [
        "Expected hits: the turns replayed through a prefix cache that never evicts (unbounded) and one of the "
        "engine's size (bounded); the engine's: each response's cached tokens.",
        ", ".join(f"{label}: {by_name[name].printed}%" for label, name in total if name in by_name) + ".",
    ]
    if plan.kv_cache_tokens:
        intro.append(
            f"Engine KV cache {plan.kv_cache_tokens:,} tokens in blocks of {plan.block_tokens} "
            f"({plan.kv_source}); working set {by_name['sessions.working_set_tokens'].printed} tokens: read "
            "the engine's hits against "
            + (
                "the bounded expectation (it must evict)."
                if against and against.value == "bounded"
                else "either expectation (the working set fits)."
            )
        )
    else:
        intro.append("The engine's KV cache size is unknown (--engine-kv-tokens): only the unbounded expectation.")
    if plan.checkpoint_window_tokens:
        intro.append(
            f"The engine keeps the model's {plan.checkpoint_window_tokens}-token sliding window only at checkpoints "
            f"({plan.checkpoint_source}): a prefix is a hit only where an earlier turn kept that window, so read "
            "its hits against the checkpointed expectations; the others are what an engine keeping every block would hit."
        )
    return [
        Table(
            title="Prefix reuse by turn",
            header=["turn", *[label for _, label in columns]],
            rows=rows,
            intro=intro,
            console="Prefix reuse by turn",
            claims=[f"sessions.turn{t}.{key}" for t in range(plan.turns) for key, _ in columns],
        )
    ]


def _per_turn(claims: list[Claim], turns: int, key: str) -> list[tuple[float, float]]:
    by_name = {c.name: c for c in claims}
    return [
        (float(t), float(by_name[f"sessions.turn{t}.{key}"].value))
        for t in range(turns)
        if f"sessions.turn{t}.{key}" in by_name
    ]


def turn_panels(records: list[RequestRecord], plan: SessionsPlan, claims: list[Claim]) -> list[Panel]:
    """Per turn: the engine's hits beside the expectations, TTFT (each request and the median), the context."""
    out: list[Panel] = []
    hits = [Series(label, _per_turn(claims, plan.turns, key)) for label, key in HITS]
    hits = [s for s in hits if s.points]
    if hits:
        out.append(
            LinePlot(
                title="Prefix-cache hits by turn: the engine against the expectations",
                key="hits-by-turn",
                x_whole=True,
                series=hits,
                x_label="turn (0: each user's first, cold)",
                y_label="% of the turn's prompt tokens",
                dots=True,
                x_from_zero=True,
                half=True,
                caption="Per turn: the engine's hits (each response's cached tokens / its prompt tokens), and the "
                "turns replayed through a prefix cache that never evicts and one of the engine's size "
                "(sessions.turn<t>.engine_hit_pct, .expected_hit_pct.unbounded, .bounded).",
            )
        )
    ok = [r for r in records if succeeded(r) and r.batch is not None]
    if len(ok) >= 2:
        each = [(float(r.batch or 0), ttft_ns(r) / NS_PER_S * 1000) for r in ok]
        median = [(t, v * 1000) for t, v in _per_turn(claims, plan.turns, "ttft_s.p50")]
        out.append(
            LinePlot(
                title="TTFT by turn",
                key="ttft-by-turn",
                x_whole=True,
                series=[Series("each request", each, line=False), Series("p50", median)],
                x_label="turn (0: each user's first, cold)",
                y_label="time to first token, ms",
                x_from_zero=True,
                half=True,
                caption="Each successful request's t_first_token - t_send at its turn, and the turn's median "
                "(sessions.turn<t>.ttft_s.p50): a warm turn's prefix served from the cache shows as a shorter wait.",
            )
        )
    context = _per_turn(claims, plan.turns, "context_tokens_mean")
    if len(context) >= 2:
        out.append(
            LinePlot(
                title="Context by turn",
                key="context-by-turn",
                x_whole=True,
                series=[Series("prompt tokens, mean", context)],
                x_label="turn",
                y_label="tokens",
                dots=True,
                x_from_zero=True,
                half=True,
                caption="The mean prompt of each turn (sessions.turn<t>.context_tokens_mean): the shared prefix, "
                "the user's history and the new message.",
            )
        )
    return out
