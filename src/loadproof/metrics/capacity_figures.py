"""A capacity run's report panels (`metrics.figures`; the catalog entry's `figures`): its headline, every
stream's tokens over time with the shared window shaded, each stream's rate and longest silence inside the
window (against the bound a criterion holds it to) and its cold TTFT, and the engine's running, waiting and
KV cache use with the window shaded and the N streams it must run marked. Presentation only: the window,
rates and gaps are `metrics.capacity`'s own functions on the stored records.
"""

from __future__ import annotations

from itertools import accumulate

from loadproof.metrics.capacity import Session, max_gap_ns, shared_window, window_tokens
from loadproof.metrics.claims import Claim
from loadproof.metrics.figures import Level, LinePlot, Panel, Point, Series, Span, headline, planned_records, thin
from loadproof.metrics.timeline import engine_panels
from loadproof.plans.capacity import CapacityPlan
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S

WINDOW_COLOUR = "#2ca02c"
HEADLINE = (
    ("sessions", "capacity.sessions"),
    ("input tokens each", "capacity.input_tokens"),
    ("all streams in the window", "capacity.window_aggregate_tokens_per_s"),
    ("slowest stream in the window", "capacity.window_per_stream_min_tokens_per_s"),
    ("cold TTFT, median", "capacity.cold_ttft_median_s"),
    ("cold TTFT, max", "capacity.cold_ttft_max_s"),
    ("window", "capacity.window_s"),
)


def figures(run: Run, plan: CapacityPlan, claims: list[Claim]) -> list[Panel]:
    """The headline, then the plots (module doc); the plots need the streams' per-chunk usage."""
    top = headline(claims, HEADLINE)
    recs = [r for r in planned_records(run.records, [s.request_id for s in plan.sessions]) if r.chunk_ns]
    if not recs or not any(sum(r.chunk_tokens) for r in recs):
        return top
    t0 = min(r.send_ns for r in recs)
    by_id = {r.request_id: r for r in run.records}
    sessions: list[Session] = [(s, by_id.get(s.request_id)) for s in plan.sessions]
    window = shared_window(plan, sessions) if plan.window_s else None
    spans = []
    if window is not None:
        start = (window.start_ns - t0) / NS_PER_S
        spans.append(Span(start, start + plan.window_s, f"shared window, W = {plan.window_s:g} s", WINDOW_COLOUR))
    panels: list[Panel] = [
        LinePlot(
            title=f"Tokens per stream over time ({len(recs)} streams)",
            key="tokens-per-stream",
            series=[Series(r.prompt_id or r.request_id, cumulative_tokens(r, t0)) for r in recs],
            x_label="seconds since the first send",
            y_label="cumulative output tokens",
            spans=spans,
            caption="One line per stream: tokens from the server's per-chunk usage. The shaded band is the "
            "shared generation window: from the last stream's first token, W seconds.",
        )
    ]
    if window is not None:
        streams = [(i + 1, r) for i, (_, r) in enumerate(sessions) if r is not None]
        rates = [(float(i), window_tokens(r, window.start_ns, window.end_ns) / plan.window_s) for i, r in streams]
        gaps = [(float(i), max_gap_ns(r, window.start_ns, window.end_ns) / NS_PER_S) for i, r in streams]
        panels += [
            LinePlot(
                title="Each stream's rate in the window",
                key="window-rate-per-stream",
                x_whole=True,
                series=[Series("tokens/s in the window", rates, line=False)],
                x_label="stream (session, in the plan's order)",
                y_label="tokens/s",
                half=True,
                caption="Tokens each stream's chunks carried inside the shared window (server usage) / W; the "
                "slowest and fastest are capacity.window_per_stream_min_tokens_per_s and _max_.",
            ),
            LinePlot(
                title="Each stream's longest silence in the window",
                key="window-gap-per-stream",
                x_whole=True,
                series=[Series("longest silence", gaps, line=False)],
                x_label="stream (session, in the plan's order)",
                y_label="seconds",
                levels=[Level(plan.max_gap_s, f"bound: {plan.max_gap_s:g} s")],
                half=True,
                caption="The longest time between two token-bearing chunks of each stream inside the window, "
                "its edges included; the streams_progress criterion holds every one to the bound.",
            ),
        ]
    cold = [
        (float(i + 1), (r.first_token_ns - r.send_ns) / NS_PER_S)
        for i, (_, r) in enumerate(sessions)
        if r is not None and r.first_token_ns is not None
    ]
    if len(cold) >= 2:
        panels.append(
            LinePlot(
                title="Each stream's cold TTFT",
                key="cold-ttft-per-stream",
                x_whole=True,
                series=[Series("t_first_token - t_send", cold, line=False)],
                x_label="stream (session, in the plan's order)",
                y_label="seconds",
                half=True,
                caption="Each stream's wait for its first token: its prefill, and the prefills queued before it "
                "(capacity.cold_ttft_median_s, _max_s).",
            )
        )
    end = max(r.end_ns for r in recs)
    levels = [Level(float(len(plan.sessions)), f"N = {len(plan.sessions)} streams")]
    return top + panels + engine_panels(run.samples, t0, end, "the first send", spans, levels)


def cumulative_tokens(record: RequestRecord, t0_ns: int) -> list[Point]:
    """(seconds since t0, output tokens so far) at the send and at every chunk, thinned."""
    totals = list(accumulate(record.chunk_tokens))
    return thin(
        [((record.send_ns - t0_ns) / NS_PER_S, 0.0)]
        + [((t - t0_ns) / NS_PER_S, float(n)) for t, n in zip(record.chunk_ns, totals)]
    )
