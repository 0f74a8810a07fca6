"""Capacity acceptance (docs/scenarios.md, 'capacity'), as a pure function of the stored run.

Inputs, all from the run directory: the plan in the manifest (`plans.capacity.CapacityPlan`: sessions,
planned input tokens, window, bounds, each session's expected probe value), the records with their
chunk times and usage, the engine /metrics samples and the events (`cancel`). The shared generation
window starts when the last of the N streams has produced its first token and lasts W seconds. Tokens
inside the window are summed from per-chunk server usage (never by counting chunks).

Each criterion is one function below, PASS, FAIL or SKIPPED with its evidence in words; the verdict
is PASS only when no criterion failed. Its report panels are `metrics.capacity_figures`'.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, number
from loadproof.metrics.intervals import Interval
from loadproof.metrics.uncertainty import rate_interval, stat_interval
from loadproof.plans.capacity import CapacityPlan, CapacitySession
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample as Sample
from loadproof.rundir import Event
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S
from loadproof.workloads.answer_window import states

# what a prediction of the scenario shows (predict/capacity.py), and CONTRACT, the figures its prediction
# contract compares (the catalog entry's `contract`); calibration reads a run's window rate
WINDOW_AGGREGATE = "capacity.window_aggregate_tokens_per_s"
PREDICTED: tuple[str, ...] = ("capacity.cold_ttft_median_s", "capacity.cold_ttft_max_s", WINDOW_AGGREGATE)
PREDICTED += ("capacity.window_per_stream_min_tokens_per_s", "capacity.window_per_stream_max_tokens_per_s")
CONTRACT = PREDICTED[:3]
Session = tuple[CapacitySession, RequestRecord | None]  # a planned session and its record, if one was made


@dataclass
class CapacityResult:
    criteria: list[Criterion]
    claims: list[Claim] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "FAIL" if any(c.failed for c in self.criteria) else "PASS"

    @property
    def reason(self) -> str:
        failed = [c for c in self.criteria if c.failed]
        return f"{failed[0].name}: {failed[0].evidence}" if failed else "every criterion passed"


@dataclass(frozen=True)
class Window:
    """The shared generation window [start_ns, end_ns]: from the last first token, W seconds long."""

    start_ns: int
    end_ns: int


def window_tokens(record: RequestRecord, start_ns: int, end_ns: int) -> int:
    """Tokens the server reported in chunks that arrived inside [start_ns, end_ns]."""
    return sum(tok for t, tok in zip(record.chunk_ns, record.chunk_tokens) if start_ns <= t <= end_ns)


def window_rate_interval(records: list[RequestRecord], window: Window, seconds: float) -> Interval | None:
    """The interval of the streams' tokens inside the window / `seconds`: batch means of its per-second series
    (metrics/uncertainty.py), from each chunk's arrival and its tokens."""
    chunks = [
        (t, float(tok))
        for r in records
        for t, tok in zip(r.chunk_ns, r.chunk_tokens)
        if window.start_ns <= t <= window.end_ns
    ]
    value = sum(tok for _, tok in chunks) / seconds if seconds > 0 else 0.0
    return rate_interval([t for t, _ in chunks], [tok for _, tok in chunks], window.start_ns, seconds, value)


def max_gap_ns(record: RequestRecord, start_ns: int, end_ns: int) -> int:
    """The longest silence of a stream inside the window, window edges included."""
    times = [start_ns] + [t for t, tok in zip(record.chunk_ns, record.chunk_tokens) if start_ns < t <= end_ns]
    times.append(end_ns)
    return max(b - a for a, b in zip(times, times[1:]))


def _values(samples: list[Sample], key: str, start_ns: int, end_ns: int | None) -> list[float]:
    """The gauge's values in samples from `start_ns` to `end_ns` (None: to the last sample)."""
    return [
        s.values[key]
        for s in samples
        if start_ns <= s.t_ns and (end_ns is None or s.t_ns <= end_ns) and key in s.values
    ]


def _first_at_or_after(samples: list[Sample], t_ns: int) -> Sample | None:
    return next((s for s in samples if s.t_ns >= t_ns), None)


def _cancel_ns(events: list[Event]) -> int | None:
    return next((e.t_ns for e in events if e.kind == "cancel"), None)


def shared_window(plan: CapacityPlan, sessions: list[Session]) -> Window | None:
    """The window, once every session has its first token; None when one never did."""
    firsts = [r.first_token_ns if r is not None else None for _, r in sessions]
    if any(t is None for t in firsts):
        return None
    start = max(t for t in firsts if t is not None)
    return Window(start, start + int(plan.window_s * NS_PER_S))


def evaluate_capacity(
    plan: CapacityPlan, records: list[RequestRecord], samples: list[Sample], events: list[Event]
) -> CapacityResult:
    by_id = {r.request_id: r for r in records}
    sessions: list[Session] = [(s, by_id.get(s.request_id)) for s in plan.sessions]
    samples = sorted(samples, key=lambda s: s.t_ns)
    baseline = samples[0].values if samples else {}
    window = shared_window(plan, sessions)
    criteria = [
        engine_idle_before(baseline) if plan.idle_timeout_s is not None else None,
        all_streams_started(sessions, events),
    ]
    if window is None:
        criteria.append(cold_phase_waiting(sessions, samples, events))
    criteria.append(prompt_tokens(sessions, plan.input_tokens))
    if window is not None:
        criteria += [
            running(samples, window, len(sessions)),
            waiting(samples, window),
            preemptions(samples, baseline, window),
            streams_progress(sessions, window, plan.max_gap_s),
            cold_prefix_cache(samples, baseline, window),
        ]
    criteria += [probes(sessions, plan.check_probes), drain(plan, records, samples, events, baseline)]
    judged = [c for c in criteria if c is not None]
    return CapacityResult(
        criteria=judged,
        claims=capacity_figures(plan, sessions, samples, baseline, window) + acceptance_claims("capacity", judged),
    )


def capacity_figures(
    plan: CapacityPlan,
    sessions: list[Session],
    samples: list[Sample],
    baseline: dict[str, float],
    window: Window | None,
) -> list[Claim]:
    claims = [
        count("capacity.sessions", len(sessions), "sessions", "N, the sessions started together", direction="neither"),
        count(
            "capacity.input_tokens",
            plan.input_tokens,
            "tokens",
            "planned input tokens per session (L)",
            direction="neither",
        ),
        number(
            "capacity.window_s", float(plan.window_s), "s", "W, the shared generation window", 1, direction="neither"
        ),
    ]
    ttfts = [r.ttft_ns / NS_PER_S for _, r in sessions if r is not None and r.ttft_ns is not None]
    if ttfts:
        claims += [
            number(
                "capacity.cold_ttft_median_s",
                statistics.median(ttfts),
                "s",
                "median over sessions of t_first_token - t_send (cold: prefix-cache hits checked)",
                2,
                direction="lower",
                interval=stat_interval(ttfts, "p50"),
            ),
            number(
                "capacity.cold_ttft_max_s",
                max(ttfts),
                "s",
                "max over sessions of t_first_token - t_send",
                2,
                direction="lower",
            ),
        ]
    if window is not None:
        hits = _cold_prefix_hits(samples, baseline, window)
        if hits is not None:
            claims.append(
                count(
                    "capacity.prefix_cache_hits",
                    int(hits[0]),
                    "tokens",
                    "prefix_cache_hits_total at window start - before sending",
                    direction="lower",
                )
            )
        per_stream = [
            window_tokens(r, window.start_ns, window.end_ns) / plan.window_s for _, r in sessions if r is not None
        ]
        claims += [
            number(
                "capacity.window_aggregate_tokens_per_s",
                sum(per_stream),
                "tokens/s",
                "tokens of all streams inside the window / W (usage per chunk); not any one user's rate",
                direction="higher",
                interval=window_rate_interval([r for _, r in sessions if r is not None], window, plan.window_s),
            ),
            number(
                "capacity.window_per_stream_min_tokens_per_s",
                min(per_stream),
                "tokens/s",
                "min over streams of the stream's tokens inside the window / W",
                direction="higher",
            ),
            number(
                "capacity.window_per_stream_max_tokens_per_s",
                max(per_stream),
                "tokens/s",
                "max over streams of the stream's tokens inside the window / W",
                direction="higher",
            ),
        ]
    if plan.check_probes:
        claims.append(
            count(
                "capacity.probes_retrieved",
                sum(_stated(s, r) for s, r in sessions),
                "sessions",
                "sessions whose answer states the planted value",
                direction="higher",
            )
        )
    if plan.theoretical_full_windows is not None:
        claims.append(
            number(
                "capacity.theoretical_full_windows",
                float(plan.theoretical_full_windows),
                "windows",
                "engine-reported KV cache tokens / max_model_len: theory, not capacity",
                2,
                direction="neither",
            )
        )
    return claims


def _stated(session: CapacitySession, record: RequestRecord | None) -> bool:
    return record is not None and states(record.output_text, session.expected)


def engine_idle_before(baseline: dict[str, float]) -> Criterion:
    """The first sample of the run, taken after the idle guard and before any session was sent."""
    running_, waiting_ = baseline.get("num_requests_running"), baseline.get("num_requests_waiting")
    if running_ is None or waiting_ is None:
        return Criterion("engine_idle_before", "FAIL", "no running/waiting gauges before the run")
    ok = running_ == 0 and waiting_ == 0
    return Criterion(
        "engine_idle_before",
        "PASS" if ok else "FAIL",
        f"before the first session: running {running_:g}, waiting {waiting_:g} (want 0 and 0)",
    )


def all_streams_started(sessions: list[Session], events: list[Event]) -> Criterion:
    """Every session produced a first token; else the missing ones, their errors and any admission stall."""
    n = len(sessions)
    missing = [s.session_id for s, r in sessions if r is None or r.first_token_ns is None]
    if not missing:
        return Criterion("all_streams_started", "PASS", f"{n}/{n} sessions produced a first token")
    errors = sorted(
        {
            f"{r.error_kind}: {r.error_message}"
            for _, r in sessions
            if r is not None and r.error_kind and r.error_kind != "cancelled"
        }
    )
    stall = next((e.evidence for e in events if e.kind == "admission_stalled"), None)
    return Criterion(
        "all_streams_started",
        "FAIL",
        f"{n - len(missing)}/{n} sessions produced a first token; missing {', '.join(missing[:5])}"
        + (f"; errors: {'; '.join(errors[:3])}" if errors else "")
        + (f"; {stall}" if stall else ""),
    )


def cold_phase_waiting(sessions: list[Session], samples: list[Sample], events: list[Event]) -> Criterion | None:
    """When the window never began: nothing waited from the first send to cancel (to the last sample
    when the run has no cancel); None when no sample fell in that span."""
    sent_ns = min((r.send_ns for _, r in sessions if r is not None), default=0)
    values = _values(samples, "num_requests_waiting", sent_ns, _cancel_ns(events))
    if not values:
        return None
    return Criterion(
        "waiting",
        "PASS" if max(values) == 0 else "FAIL",
        f"num_requests_waiting max {max(values):g} over {len(values)} samples of the cold phase (want 0)",
    )


def prompt_tokens(sessions: list[Session], planned: int) -> Criterion:
    """usage.prompt_tokens is the planned L for every session, as the engine counted it."""
    wrong = [
        (s.session_id, r.prompt_tokens if r else None) for s, r in sessions if r is None or r.prompt_tokens != planned
    ]
    n = len(sessions)
    return Criterion(
        "prompt_tokens",
        "FAIL" if wrong else "PASS",
        f"usage.prompt_tokens == {planned} for {n - len(wrong)}/{n} sessions"
        + (f"; e.g. {wrong[0][0]} had {wrong[0][1]}" if wrong else ""),
    )


def running(samples: list[Sample], window: Window, n: int) -> Criterion:
    """num_requests_running == N in every sample inside the window."""
    values = _values(samples, "num_requests_running", window.start_ns, window.end_ns)
    if not values:
        return Criterion("running", "FAIL", "no /metrics sample inside the window")
    ok = min(values) == n and max(values) == n
    return Criterion(
        "running",
        "PASS" if ok else "FAIL",
        f"num_requests_running min {min(values):g}, max {max(values):g} over {len(values)} samples (want {n})",
    )


def waiting(samples: list[Sample], window: Window) -> Criterion:
    """num_requests_waiting == 0 in every sample inside the window."""
    values = _values(samples, "num_requests_waiting", window.start_ns, window.end_ns)
    if not values:
        return Criterion("waiting", "FAIL", "no /metrics sample inside the window")
    return Criterion(
        "waiting",
        "PASS" if max(values) == 0 else "FAIL",
        f"num_requests_waiting max {max(values):g} over {len(values)} samples (want 0)",
    )


def preemptions(samples: list[Sample], baseline: dict[str, float], window: Window) -> Criterion:
    """num_preemptions_total did not grow from before the sessions were sent to the window's end."""
    first_ns = samples[0].t_ns if samples else 0
    values = _values(samples, "num_preemptions_total", first_ns, window.end_ns)
    if "num_preemptions_total" not in baseline or not values:
        return Criterion("preemptions", "FAIL", "the engine exposes no preemption counter")
    delta = max(values) - baseline["num_preemptions_total"]
    return Criterion(
        "preemptions", "PASS" if delta == 0 else "FAIL", f"num_preemptions_total grew by {delta:g} (want 0)"
    )


def streams_progress(sessions: list[Session], window: Window, max_gap_s: float) -> Criterion:
    """No stream ended before the window closed, and none was silent longer than `max_gap_s` inside it."""
    ended = [
        (s.session_id, r)
        for s, r in sessions
        if r is not None and r.error_kind != "cancelled" and r.end_ns < window.end_ns
    ]
    if ended:
        sid, r = ended[0]
        why = r.finish_reason or r.error_kind or "ended"
        return Criterion(
            "streams_progress",
            "FAIL",
            f"{len(ended)} stream(s) ended before the window closed, e.g. {sid} "
            f"({why}, {(window.end_ns - r.end_ns) / NS_PER_S:.1f} s early)",
        )
    gaps = [(s.session_id, max_gap_ns(r, window.start_ns, window.end_ns) / NS_PER_S) for s, r in sessions if r]
    sid, worst = max(gaps, key=lambda g: g[1])
    return Criterion(
        "streams_progress",
        "PASS" if worst <= max_gap_s else "FAIL",
        f"longest silence inside the window {worst:.2f} s ({sid}), bound {max_gap_s:g} s",
    )


def _cold_prefix_hits(samples: list[Sample], baseline: dict[str, float], window: Window) -> tuple[float, float] | None:
    """(hits, queried tokens) of the prefix cache from before sending to the window's start; None
    without the counters."""
    at_start = _first_at_or_after(samples, window.start_ns)
    if "prefix_cache_hits_total" not in baseline or at_start is None:
        return None
    values = at_start.values
    return (
        values.get("prefix_cache_hits_total", 0.0) - baseline["prefix_cache_hits_total"],
        values.get("prefix_cache_queries_total", 0.0) - baseline.get("prefix_cache_queries_total", 0.0),
    )


def cold_prefix_cache(samples: list[Sample], baseline: dict[str, float], window: Window) -> Criterion:
    """No prefix-cache hit before the last first token: every session was prefilled cold."""
    hits = _cold_prefix_hits(samples, baseline, window)
    if hits is None:
        return Criterion("cold_prefix_cache", "FAIL", "no prefix-cache counters to check coldness")
    return Criterion(
        "cold_prefix_cache",
        "PASS" if hits[0] == 0 else "FAIL",
        f"{hits[0]:,.0f} prefix-cache hits of {hits[1]:,.0f} queried tokens in the cold phase (want 0)",
    )


def probes(sessions: list[Session], check: bool) -> Criterion:
    """Every session's answer states its planted value (SKIPPED, and said, when the check is off)."""
    if not check:
        return Criterion("probes", "SKIPPED", "probe check skipped by option (e.g. random weights)")
    missed = [s.session_id for s, r in sessions if not _stated(s, r)]
    return Criterion(
        "probes",
        "FAIL" if missed else "PASS",
        f"{len(sessions) - len(missed)}/{len(sessions)} planted facts retrieved"
        + (f"; missed {', '.join(missed[:5])}" if missed else ""),
    )


def drain(
    plan: CapacityPlan,
    records: list[RequestRecord],
    samples: list[Sample],
    events: list[Event],
    baseline: dict[str, float],
) -> Criterion:
    """Every request the run sent has left the engine: the first sample taken after cancel and after the
    last of the run's connections closed shows 0 running, 0 waiting and KV back near idle, within the
    bound. Those are the engine's only two places for a request, so a queued session whose client left
    but which the engine kept would show as waiting (or, admitted late, as running) there."""
    cancel_ns = _cancel_ns(events)
    if cancel_ns is None:
        return Criterion("drain", "FAIL", "the run has no cancel event (interrupted before the window ended?)")
    bound, kv_bound = plan.drain_timeout_s, plan.kv_idle_bound
    idle_kv = baseline.get("kv_cache_usage_perc", 0.0)
    closed_ns = max([cancel_ns] + [r.end_ns for r in records])
    queued = sum(r.first_token_ns is None and r.send_ns <= cancel_ns for r in records)
    sent = f"all {len(records)} requests sent ({queued} without a first token at cancel)"
    after = [s for s in samples if s.t_ns >= closed_ns]
    drained = next(
        (
            s
            for s in after
            if s.values.get("num_requests_running", 1) == 0
            and s.values.get("num_requests_waiting", 1) == 0
            and s.values.get("kv_cache_usage_perc", 1.0) <= idle_kv + kv_bound
        ),
        None,
    )
    if drained is not None and (drained.t_ns - cancel_ns) / NS_PER_S <= bound:
        v = drained.values
        return Criterion(
            "drain",
            "PASS",
            f"{sent} closed {(closed_ns - cancel_ns) / NS_PER_S:.2f} s after cancel; then running 0, "
            f"waiting 0, KV {v.get('kv_cache_usage_perc', 0) * 100:.1f}% (idle {idle_kv * 100:.1f}% + "
            f"{kv_bound * 100:.0f}%) {(drained.t_ns - cancel_ns) / NS_PER_S:.1f} s after cancel "
            f"(bound {bound:g} s)",
        )
    last = after[-1].values if after else {}
    return Criterion(
        "drain",
        "FAIL",
        f"not drained within {bound:g} s of cancel ({sent}): running {last.get('num_requests_running')}, "
        f"waiting {last.get('num_requests_waiting')}, KV {_pct(last.get('kv_cache_usage_perc'))}",
    )


def claims_of_run(run: Run, plan: CapacityPlan) -> list[Claim]:
    return evaluate_capacity(plan, run.records, run.samples, run.events).claims


def _pct(fraction: float | None) -> str:
    return "unknown" if fraction is None else f"{fraction * 100:.1f}%"
