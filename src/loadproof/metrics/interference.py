"""Interference figures (docs/scenarios.md, 'interference'): the M streams' aggregate rate before, during and after a newcomer's prefill.

before: tokens of the M streams in [t0, t0 + W] / W, t0 = the last of their first tokens;
during: tokens of the M streams in [newcomer send, newcomer first token] / that span;
after:  tokens of the M streams in [newcomer first token, + W] / W.
Then each session's follow-up on the same context: prefix-cache hits expected, fact retrieved.
"""

from __future__ import annotations

from collections import defaultdict

from loadproof.metrics.capacity import Window, window_rate_interval, window_tokens
from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, number
from loadproof.metrics.disaggregation import disaggregation_claims, request_claims
from loadproof.metrics.figures import LinePlot, Mark, Panel, Series, Span, headline, planned_records
from loadproof.metrics.intervals import Interval
from loadproof.metrics.prefill import counter_delta
from loadproof.metrics.timeline import engine_panels
from loadproof.plans.interference import InterferencePlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S
from loadproof.workloads.answer_window import states


def interference_claims(
    plan: InterferencePlan, records: list[RequestRecord], samples: list[EngineSample]
) -> list[Claim]:
    samples = sorted(samples, key=lambda s: s.t_ns)
    by_id = {r.request_id: r for r in records}
    streams = [by_id.get(s.request_id) for s in plan.sessions]
    newcomer = by_id.get(plan.newcomer.request_id)
    window_ns = int(plan.window_s * NS_PER_S)
    claims: list[Claim] = [
        count("interference.sessions", len(streams), "sessions", "M, streams already generating", direction="neither")
    ]
    criteria: list[Criterion] = []
    started = [r for r in streams if r is not None and r.first_token_ns is not None]
    if len(started) < len(streams):
        criteria.append(
            Criterion("streams_started", "FAIL", f"{len(started)}/{len(streams)} sessions produced a first token")
        )
    else:
        criteria.append(
            Criterion("streams_started", "PASS", f"{len(streams)}/{len(streams)} sessions produced a first token")
        )
        t0 = max(r.first_token_ns for r in started if r.first_token_ns is not None)  # `started` holds only those

        def rate(a: int, b: int) -> float:
            return sum(window_tokens(r, a, b) for r in started) * NS_PER_S / (b - a) if b > a else 0.0

        def spread(a: int, b: int) -> Interval | None:
            return window_rate_interval(started, Window(a, b), (b - a) / NS_PER_S)

        claims.append(
            number(
                "interference.before_tokens_per_s",
                rate(t0, t0 + window_ns),
                "tokens/s",
                "tokens of the M streams in [t0, t0 + W] / W; aggregate, not one user's rate",
                direction="higher",
                interval=spread(t0, t0 + window_ns),
            )
        )
        if newcomer is not None and newcomer.first_token_ns is not None:
            ttft_s = (newcomer.first_token_ns - newcomer.send_ns) / NS_PER_S
            claims += [
                number(
                    "interference.during_tokens_per_s",
                    rate(newcomer.send_ns, newcomer.first_token_ns),
                    "tokens/s",
                    "tokens of the M streams from the newcomer's send to its first token / that span",
                    direction="higher",
                    interval=spread(newcomer.send_ns, newcomer.first_token_ns),
                ),
                number(
                    "interference.after_tokens_per_s",
                    rate(newcomer.first_token_ns, newcomer.first_token_ns + window_ns),
                    "tokens/s",
                    "tokens of the M streams in [newcomer first token, + W] / W",
                    direction="higher",
                    interval=spread(newcomer.first_token_ns, newcomer.first_token_ns + window_ns),
                ),
                number(
                    "interference.newcomer_ttft_s",
                    ttft_s,
                    "s",
                    "newcomer t_first_token - t_send, while the M streams generate",
                    2,
                    direction="lower",
                ),
            ]
            if plan.longest_gap:
                claims.append(
                    number(
                        "interference.during_longest_gap_s",
                        longest_gap(started, newcomer.send_ns, newcomer.first_token_ns + window_ns) / NS_PER_S,
                        "s",
                        "longest wait between two token chunks of any of the M streams from the newcomer's send to W after "
                        "its first token: the worst stall a reader saw",
                        3,
                        direction="lower",
                    )
                )
            claims += request_claims(newcomer, "interference.newcomer")
            criteria.append(Criterion("newcomer_first_token", "PASS", f"first token after {ttft_s:.2f} s"))
        else:
            why = f"{newcomer.error_kind}: {newcomer.error_message}" if newcomer else "never sent"
            criteria.append(Criterion("newcomer_first_token", "FAIL", f"the newcomer produced no token ({why})"))
    # follow-ups: warm, correct
    followups = [by_id.get(s.followup_request_id) for s in plan.sessions]
    retrieved, hits, missing_hits = 0, 0.0, []
    for s, rec in zip(plan.sessions, followups):
        if rec is None or not rec.ok:
            continue
        if states(rec.output_text, s.expected):
            retrieved += 1
        delta = counter_delta(samples, "prefix_cache_hits_total", rec.send_ns, rec.end_ns)
        hits += delta or 0.0
        if not delta:
            missing_hits.append(s.session_id)
    n = len(plan.sessions)
    done = sum(1 for r in followups if r is not None and r.ok)
    claims.append(
        count(
            "interference.followup_prefix_cache_hits",
            int(hits),
            "tokens",
            "sum over follow-ups of prefix_cache_hits_total growth across the follow-up",
            direction="higher",
        )
    )
    criteria.append(
        Criterion(
            "followup_warm",
            "FAIL" if missing_hits or done < n else "PASS",
            f"{done - len(missing_hits)}/{n} follow-ups hit the prefix cache ({hits:g} tokens)"
            + (f"; cold: {', '.join(missing_hits)}" if missing_hits else ""),
        )
    )
    if plan.check_probes:
        claims.append(
            count(
                "interference.followup_retrieved",
                retrieved,
                "sessions",
                "follow-ups whose answer states the session's planted value",
                direction="higher",
            )
        )
        criteria.append(
            Criterion(
                "followup_probes",
                "PASS" if retrieved == n else "FAIL",
                f"{retrieved}/{n} follow-ups stated their planted fact",
            )
        )
    else:
        criteria.append(Criterion("followup_probes", "SKIPPED", "probe check skipped by option (e.g. random weights)"))
    claims += disaggregation_claims(records, "interference")
    return claims + acceptance_claims("interference", criteria)


def longest_gap(streams: list[RequestRecord], a: int, b: int) -> int:
    """The longest gap between successive token chunks of one stream that overlaps [a, b] (ns; 0 if none)."""
    longest = 0
    for r in streams:
        for t0, t1 in zip(r.chunk_ns, r.chunk_ns[1:]):
            if t1 > a and t0 < b:
                longest = max(longest, t1 - t0)
    return longest


def claims_of_run(run: Run, plan: InterferencePlan) -> list[Claim]:
    return interference_claims(plan, run.records, run.samples)


# --- report panels (catalog entry `figures`) ---------------------------------------------------------


HEADLINE = (
    ("streams, before", "interference.before_tokens_per_s"),
    ("during the newcomer's prefill", "interference.during_tokens_per_s"),
    ("after", "interference.after_tokens_per_s"),
    ("newcomer's TTFT", "interference.newcomer_ttft_s"),
    ("follow-ups' prefix-cache hits", "interference.followup_prefix_cache_hits"),
)


def figures(run: Run, plan: InterferencePlan, claims: list[Claim]) -> list[Panel]:
    """The headline; the M streams' aggregate token rate over time, the newcomer's prefill and the windows
    shaded; the engine's running, waiting and KV cache use under the same shading (report.html)."""
    top = headline(claims, HEADLINE)
    streams = [r for r in planned_records(run.records, [s.request_id for s in plan.sessions]) if r.chunk_ns]
    if not streams:
        return top
    t0 = min(r.send_ns for r in streams)
    events = sorted((t, n) for r in streams for t, n in zip(r.chunk_ns, r.chunk_tokens))
    span_s = (events[-1][0] - t0) / NS_PER_S
    if span_s <= 0 or not any(n for _, n in events):
        return top
    width = max(span_s / 60, 0.25)  # coarse enough that chunk arrival jitter does not look like rate
    bins: dict[int, int] = defaultdict(int)
    for t, n in events:
        bins[int((t - t0) / NS_PER_S / width)] += n
    points = [((k + 0.5) * width, bins.get(k, 0) / width) for k in range(int(span_s / width) + 1)]
    spans, marks = [], []
    firsts = [r.first_token_ns for r in streams if r.first_token_ns is not None]
    if plan.window_s and firsts:
        start = (max(firsts) - t0) / NS_PER_S
        spans.append(Span(start, start + plan.window_s, "before", "#2ca02c"))
    newcomer = next((r for r in run.records if r.request_id == plan.newcomer.request_id), None)
    if newcomer is not None:
        sent = (newcomer.send_ns - t0) / NS_PER_S
        marks.append(Mark(sent, "newcomer sent"))
        if newcomer.first_token_ns is not None:
            first = (newcomer.first_token_ns - t0) / NS_PER_S
            spans.append(Span(sent, first, "during: newcomer prefill", "#d62728"))
            if plan.window_s:
                spans.append(Span(first, first + plan.window_s, "after", "#1f77b4"))
    end = max(r.end_ns for r in run.records if r.send_ns)
    engine = engine_panels(run.samples, t0, end, "the first send", spans)
    return (
        top
        + [
            LinePlot(
                title=f"Aggregate token rate of the {len(streams)} running streams",
                key="stream-rate",
                series=[Series("M streams", points)],
                x_label="seconds since the first send",
                y_label="tokens/s, all M streams",
                spans=spans,
                marks=marks,
                caption=f"Tokens of the M streams per {width:.2f} s bin (server per-chunk usage) / bin width. "
                "Shaded: the before window, the newcomer's prefill (send to first token), the after window.",
            )
        ]
        + engine
    )
