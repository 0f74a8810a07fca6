"""Capacity acceptance (DESIGN.md, 'Capacity acceptance'), as a pure function of the stored run.

Inputs, all from the run directory: the plan in the manifest (sessions, planned input tokens, window,
bounds, each session's expected probe value), the records with their chunk times and usage, the
engine /metrics samples and the events (`cancel`). The shared generation window starts when the last
of the N streams has produced its first token and lasts W seconds. Tokens inside the window are summed
from per-chunk server usage (never by counting chunks).

Each criterion is PASS, FAIL or SKIPPED with its evidence in words; the verdict is PASS only when no
criterion failed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from loadproof.metrics.claims import Claim, number
from loadproof.records import RequestRecord
from loadproof.workloads.answer_window import states

NS = 1_000_000_000


@dataclass(frozen=True)
class Criterion:
    name: str
    status: str  # PASS | FAIL | SKIPPED
    evidence: str

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


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


def window_tokens(record: RequestRecord, start_ns: int, end_ns: int) -> int:
    """Tokens the server reported in chunks that arrived inside [start_ns, end_ns]."""
    return sum(tok for t, tok in zip(record.chunk_ns, record.chunk_tokens) if start_ns <= t <= end_ns)


def max_gap_ns(record: RequestRecord, start_ns: int, end_ns: int) -> int:
    """The longest silence of a stream inside the window, window edges included."""
    times = [start_ns] + [t for t, tok in zip(record.chunk_ns, record.chunk_tokens) if start_ns < t <= end_ns]
    times.append(end_ns)
    return max(b - a for a, b in zip(times, times[1:]))


def _values(samples: list[dict[str, Any]], key: str, start_ns: int, end_ns: int) -> list[float]:
    return [s["values"][key] for s in samples if start_ns <= s["t_ns"] <= end_ns and key in s["values"]]


def _first_at_or_after(samples: list[dict[str, Any]], t_ns: int) -> dict[str, Any] | None:
    return next((s for s in samples if s["t_ns"] >= t_ns), None)


def evaluate_capacity(plan: dict[str, Any], records: list[RequestRecord], samples: list[dict[str, Any]],
                      events: list[dict[str, Any]], prefix: str = "capacity") -> CapacityResult:
    sessions = plan["sessions"]
    n = len(sessions)
    planned_tokens = plan["input_tokens"]
    window_s = plan["window_s"]
    by_id = {r.request_id: r for r in records}
    recs = [by_id.get(s["request_id"]) for s in sessions]
    criteria: list[Criterion] = []
    samples = sorted(samples, key=lambda s: s["t_ns"])
    baseline = samples[0]["values"] if samples else {}
    sent_ns = min((r.send_ns for r in recs if r is not None), default=0)

    # 0. the engine was idle when the run began (runs made since the idle guard; older plans lack it)
    if "idle_timeout_s" in plan:
        criteria.append(_idle_before(baseline))

    # 1. every session started streaming
    started = [r for r in recs if r is not None and r.first_token_ns is not None]
    if len(started) < n:
        missing = [s["session_id"] for s, r in zip(sessions, recs) if r is None or r.first_token_ns is None]
        errors = sorted({f"{r.error_kind}: {r.error_message}" for r in recs if r is not None and r.error_kind
                         and r.error_kind != "cancelled"})
        stall = next((e["evidence"] for e in events if e.get("kind") == "admission_stalled"), None)
        criteria.append(Criterion("all_streams_started", "FAIL",
                                  f"{len(started)}/{n} sessions produced a first token; missing {', '.join(missing[:5])}"
                                  + (f"; errors: {'; '.join(errors[:3])}" if errors else "")
                                  + (f"; {stall}" if stall else "")))
        window_start = window_end = None
        cancel_ns = next((e["t_ns"] for e in events if e.get("kind") == "cancel"), None)
        waiting = _values(samples, "num_requests_waiting", sent_ns, cancel_ns if cancel_ns is not None else 2**63)
        if waiting:
            criteria.append(Criterion("waiting", "PASS" if max(waiting) == 0 else "FAIL",
                                      f"num_requests_waiting max {max(waiting):g} over {len(waiting)} samples "
                                      "of the cold phase (want 0)"))
    else:
        window_start = max(r.first_token_ns for r in started)  # type: ignore[type-var]
        window_end = window_start + int(window_s * NS)
        criteria.append(Criterion("all_streams_started", "PASS", f"{n}/{n} sessions produced a first token"))

    # 2. prompt tokens as planned, from the engine's usage
    wrong = [(s["session_id"], r.prompt_tokens if r else None) for s, r in zip(sessions, recs)
             if r is None or r.prompt_tokens != planned_tokens]
    criteria.append(Criterion(
        "prompt_tokens", "FAIL" if wrong else "PASS",
        f"usage.prompt_tokens == {planned_tokens} for {n - len(wrong)}/{n} sessions"
        + (f"; e.g. {wrong[0][0]} had {wrong[0][1]}" if wrong else "")))

    claims: list[Claim] = [
        number(f"{prefix}.sessions", n, "sessions", "N, the sessions started together"),
        number(f"{prefix}.input_tokens", planned_tokens, "tokens", "planned input tokens per session (L)"),
        number(f"{prefix}.window_s", float(window_s), "s", "W, the shared generation window", 1),
    ]
    ttfts = [r.ttft_ns / NS for r in started if r.ttft_ns is not None]
    if ttfts:
        claims.append(number(f"{prefix}.cold_ttft_median_s", statistics.median(ttfts), "s",
                             "median over sessions of t_first_token - t_send (cold: prefix-cache hits checked)", 2))
        claims.append(number(f"{prefix}.cold_ttft_max_s", max(ttfts), "s", "max over sessions of t_first_token - t_send", 2))

    if window_start is not None and window_end is not None:
        # 3, 4. engine-side: running == N and waiting == 0 throughout the window
        running = _values(samples, "num_requests_running", window_start, window_end)
        waiting = _values(samples, "num_requests_waiting", window_start, window_end)
        if not running:
            criteria.append(Criterion("running", "FAIL", "no /metrics sample inside the window"))
        else:
            ok = min(running) == n and max(running) == n
            criteria.append(Criterion("running", "PASS" if ok else "FAIL",
                                      f"num_requests_running min {min(running):g}, max {max(running):g} "
                                      f"over {len(running)} samples (want {n})"))
        if waiting:
            criteria.append(Criterion("waiting", "PASS" if max(waiting) == 0 else "FAIL",
                                      f"num_requests_waiting max {max(waiting):g} over {len(waiting)} samples (want 0)"))
        else:
            criteria.append(Criterion("waiting", "FAIL", "no /metrics sample inside the window"))
        # 5. no preemption from before the sessions were sent to the end of the window
        counts = _values(samples, "num_preemptions_total", samples[0]["t_ns"] if samples else 0, window_end)
        if "num_preemptions_total" in baseline and counts:
            delta = max(counts) - baseline["num_preemptions_total"]
            criteria.append(Criterion("preemptions", "PASS" if delta == 0 else "FAIL",
                                      f"num_preemptions_total grew by {delta:g} (want 0)"))
        else:
            criteria.append(Criterion("preemptions", "FAIL", "the engine exposes no preemption counter"))
        # 6. every stream keeps producing through the window
        max_gap_s = plan["max_gap_s"]
        gaps = [(s["session_id"], max_gap_ns(r, window_start, window_end) / NS) for s, r in zip(sessions, recs) if r]
        worst = max(gaps, key=lambda g: g[1])
        ended = [(s["session_id"], r) for s, r in zip(sessions, recs)
                 if r is not None and r.error_kind != "cancelled" and r.end_ns < window_end]
        if ended:
            sid, r = ended[0]
            why = r.finish_reason or r.error_kind or "ended"
            criteria.append(Criterion("streams_progress", "FAIL",
                                      f"{len(ended)} stream(s) ended before the window closed, e.g. {sid} "
                                      f"({why}, {(window_end - r.end_ns) / NS:.1f} s early)"))
        else:
            criteria.append(Criterion("streams_progress", "PASS" if worst[1] <= max_gap_s else "FAIL",
                                      f"longest silence inside the window {worst[1]:.2f} s ({worst[0]}), "
                                      f"bound {max_gap_s:g} s"))
        # 7. cold: no prefix-cache hit before the last first token
        at_start = _first_at_or_after(samples, window_start)
        if "prefix_cache_hits_total" in baseline and at_start is not None:
            hits = at_start["values"].get("prefix_cache_hits_total", 0.0) - baseline["prefix_cache_hits_total"]
            queries = (at_start["values"].get("prefix_cache_queries_total", 0.0)
                       - baseline.get("prefix_cache_queries_total", 0.0))
            criteria.append(Criterion("cold_prefix_cache", "PASS" if hits == 0 else "FAIL",
                                      f"{hits:g} prefix-cache hits of {queries:g} queried tokens in the cold phase (want 0)"))
            claims.append(number(f"{prefix}.prefix_cache_hits", int(hits), "tokens",
                                 "prefix_cache_hits_total at window start - before sending"))
        else:
            criteria.append(Criterion("cold_prefix_cache", "FAIL", "no prefix-cache counters to check coldness"))
        # window figures
        per_stream = [window_tokens(r, window_start, window_end) / window_s for r in recs if r]
        claims += [
            number(f"{prefix}.window_aggregate_tokens_per_s", sum(per_stream), "tokens/s",
                   "tokens of all streams inside the window / W (usage per chunk); not any one user's rate"),
            number(f"{prefix}.window_per_stream_min_tokens_per_s", min(per_stream), "tokens/s",
                   "min over streams of the stream's tokens inside the window / W"),
            number(f"{prefix}.window_per_stream_max_tokens_per_s", max(per_stream), "tokens/s",
                   "max over streams of the stream's tokens inside the window / W"),
        ]

    # 8. every planted fact retrieved
    if plan.get("check_probes", True):
        got = [bool(r) and states(r.output_text, s["expected"]) for s, r in zip(sessions, recs)]
        missed = [s["session_id"] for s, ok in zip(sessions, got) if not ok]
        criteria.append(Criterion("probes", "FAIL" if missed else "PASS",
                                  f"{sum(got)}/{n} planted facts retrieved" + (f"; missed {', '.join(missed[:5])}" if missed else "")))
        claims.append(number(f"{prefix}.probes_retrieved", sum(got), "sessions", "sessions whose answer states the planted value"))
    else:
        criteria.append(Criterion("probes", "SKIPPED", "probe check skipped by option (e.g. random weights)"))

    # 9. after cancellation the engine lets go of every request the run sent, queued ones included
    criteria.append(_drain(plan, records, samples, events, baseline))

    result = CapacityResult(criteria=criteria)
    theory = plan.get("theoretical_full_windows")
    if theory is not None:
        claims.append(number(f"{prefix}.theoretical_full_windows", float(theory), "windows",
                             "engine-reported KV cache tokens / max_model_len: theory, not capacity", 2))
    result.claims = claims + acceptance_claims(prefix, criteria)
    return result


def _idle_before(baseline: dict[str, float]) -> Criterion:
    """The first sample of the run, taken after the idle guard and before any session was sent."""
    running, waiting = baseline.get("num_requests_running"), baseline.get("num_requests_waiting")
    if running is None or waiting is None:
        return Criterion("engine_idle_before", "FAIL", "no running/waiting gauges before the run")
    ok = running == 0 and waiting == 0
    return Criterion("engine_idle_before", "PASS" if ok else "FAIL",
                     f"before the first session: running {running:g}, waiting {waiting:g} (want 0 and 0)")


def _drain(plan: dict[str, Any], records: list[RequestRecord], samples: list[dict[str, Any]],
           events: list[dict[str, Any]], baseline: dict[str, float]) -> Criterion:
    """Every request the run sent has left the engine: the first sample taken after cancel and after the
    last of the run's connections closed shows 0 running, 0 waiting and KV back near idle, within the
    bound. Those are the engine's only two places for a request, so a queued session whose client left
    but which the engine kept would show as waiting (or, admitted late, as running) there."""
    cancel = next((e for e in events if e.get("kind") == "cancel"), None)
    if cancel is None:
        return Criterion("drain", "FAIL", "the run has no cancel event (interrupted before the window ended?)")
    bound = plan["drain_timeout_s"]
    kv_bound = plan["kv_idle_bound"]
    idle_kv = baseline.get("kv_cache_usage_perc", 0.0)
    closed_ns = max([cancel["t_ns"]] + [r.end_ns for r in records])
    queued = sum(r.first_token_ns is None and r.send_ns <= cancel["t_ns"] for r in records)
    sent = f"all {len(records)} requests sent ({queued} without a first token at cancel)"
    after = [s for s in samples if s["t_ns"] >= closed_ns]
    drained = next((s for s in after if s["values"].get("num_requests_running", 1) == 0
                    and s["values"].get("num_requests_waiting", 1) == 0
                    and s["values"].get("kv_cache_usage_perc", 1.0) <= idle_kv + kv_bound), None)
    if drained is not None and (drained["t_ns"] - cancel["t_ns"]) / NS <= bound:
        v = drained["values"]
        return Criterion("drain", "PASS",
                         f"{sent} closed {(closed_ns - cancel['t_ns']) / NS:.2f} s after cancel; then running 0, "
                         f"waiting 0, KV {v.get('kv_cache_usage_perc', 0) * 100:.1f}% (idle {idle_kv * 100:.1f}% + "
                         f"{kv_bound * 100:.0f}%) {(drained['t_ns'] - cancel['t_ns']) / NS:.1f} s after cancel "
                         f"(bound {bound:g} s)")
    last = after[-1]["values"] if after else {}
    return Criterion("drain", "FAIL",
                     f"not drained within {bound:g} s of cancel ({sent}): running {last.get('num_requests_running')}, "
                     f"waiting {last.get('num_requests_waiting')}, KV {last.get('kv_cache_usage_perc')}")


def acceptance_claims(prefix: str, criteria: list[Criterion]) -> list[Claim]:
    """`<prefix>.verdict` and one `<prefix>.criteria.<name>` claim per criterion (evidence as formula)."""
    verdict = "FAIL" if any(c.failed for c in criteria) else "PASS"
    out = [Claim(f"{prefix}.verdict", verdict, "", verdict, "PASS only if every criterion passed")]
    out += [Claim(f"{prefix}.criteria.{c.name}", c.status, "", c.status, c.evidence) for c in criteria]
    return out


def claims_of_run(run) -> list[Claim]:
    return evaluate_capacity(run.manifest["plan"], run.records, run.samples, run.events).claims
