"""The views of a run's live status: text only, for any console (the CLI's renderer is `cli.ui.LiveView`).
`describe` gives a phase's heading and parts from a `Snapshot`, `line` the same as one plain line; what
each phase shows is in `scenarios.live`'s docstring and docs/scenarios.md, "What a person sees while a run
runs".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from loadproof.scenarios.live import RATE_SPAN_S, TTFT_KEPT
from loadproof.scenarios.live_snapshot import COLD, DRAIN, REQUESTS, WINDOW, Snapshot
from loadproof.units import NS_PER_S as NS

STALE_ENGINE_S = 5.0  # an engine sample older than this is shown with its age


def describe(snap: Snapshot, index: int | None = None) -> tuple[str, list[str]]:
    """The heading and the parts of phase `index`'s view (default: the current phase). A phase that
    has ended is described with its final figures ("ended after" its duration), the engine's as of the
    last sample taken before the next phase was declared."""
    index = len(snap.phases) - 1 if index is None else index
    phase = snap.phases[index]
    closed = index + 1 < len(snap.phases)
    until = snap.phases[index + 1].start_ns if closed else snap.t_ns
    if closed and snap.engine is not None:
        snap = replace(snap, engine=snap.engine_at(snap.phases[index + 1].declared_ns), engine_age_s=None)
    took = clock_text((until - phase.start_ns) / NS)
    heading = f"{snap.scenario} {phase.name}" + (f" ended after {took}" if closed else f" {took}")
    detail = phase.detail or (snap.detail if not closed else "")
    if detail:
        heading += f" ({detail})"
    parts = VIEWS.get(phase.kind, _nothing)(snap, index, closed)
    return heading, parts


def _nothing(snap: Snapshot, index: int, closed: bool) -> list[str]:
    return []  # a phase with no view of its own (preparing, end): its heading alone


def line(snap: Snapshot, index: int | None = None) -> str:
    """One plain line: the heading, then the parts."""
    heading, parts = describe(snap, index)
    return heading + (": " + "; ".join(parts) if parts else "")


def _cold(snap: Snapshot, index: int, closed: bool) -> list[str]:
    parts = [f"sessions sent {snap.sent}/{snap.sessions}, first tokens {snap.first_tokens}/{snap.sessions} (client)"]
    if snap.errors:
        parts[0] += f", {snap.errors} failed"
    parts += _engine(snap)
    done = snap.growth("prompt_tokens_total")
    if done is not None:
        parts.append(
            f"prompt tokens completed {done:,.0f}/{snap.prompt_tokens_planned:,} "
            "(engine counter: prefills that finished)"
        )
    held = snap.kv_estimate()
    if held is not None:
        parts.append(f"~{held:,.0f} in the KV cache (estimate from KV usage, prefills in progress too)")
    if not closed:
        eta, source = snap.eta(index)
        parts.append(
            f"ETA {clock_text(eta)} (from the rate of {source} so far)"
            if eta is not None
            else "ETA: once the first prefill completes"
        )
    return parts


def _window(snap: Snapshot, index: int, closed: bool) -> list[str]:
    w = snap.windows[index]
    if w.left_s is None:
        timing = f"{clock_text(w.elapsed_s)} so far"
    else:
        planned = w.elapsed_s + w.left_s if not closed else None
        timing = (
            f"{clock_text(w.left_s)} left of {clock_text(planned)}"
            if planned is not None
            else f"{clock_text(w.elapsed_s)} measured"
        )
    parts = [timing]
    if w.per_stream is not None and w.together is not None:
        low, mid, high = w.per_stream
        parts.append(
            f"per stream {low:,.1f} / {mid:,.1f} / {high:,.1f} {w.unit} (min / median / max over "
            f"{w.streams}), together {w.together:,.1f} {w.unit}"
        )
    if snap.errors:
        parts.append(f"{snap.errors} failed")
    return parts + _engine(snap)


def _drain(snap: Snapshot, index: int, closed: bool) -> list[str]:
    engine = _engine(snap, lead="engine at the end: " if closed else "waiting for the engine to let go: ")
    return engine or ["(no engine /metrics)"]


def _requests(snap: Snapshot, index: int, closed: bool) -> list[str]:
    phase = snap.phases[index]
    done = f"{snap.done}/{snap.planned} done" if snap.planned else f"{snap.done} done"
    parts = [f"{done}, {snap.errors} errors" + (f", {snap.cancelled} cancelled" if snap.cancelled else "")]
    until = snap.phases[index + 1].start_ns if closed else snap.t_ns
    if phase.end_ns is not None:  # a schedule's planned end: the rate sent over the sending, not the drain
        until = min(until, phase.end_ns)
    elapsed = (until - phase.start_ns) / NS
    if snap.sent and elapsed > 0:  # the rate asked is in the heading (the phase's detail)
        parts[0] += f"; sent {snap.sent:,} ({snap.sent / elapsed:,.3g}/s)"
        parts[0] += "" if closed else f", {snap.sent - snap.done:,} in flight"
    if snap.rate is not None and not closed:
        parts.append(f"{snap.rate:,.0f} {snap.rate_unit} (last {RATE_SPAN_S:g} s)")
    if snap.ttft_p50_s is not None:
        last = f", last {TTFT_KEPT:,}" if snap.ttft_count > TTFT_KEPT else ""
        itl = f", ITL p50 {snap.tpot_p50_s * 1000:,.3g} ms" if snap.tpot_p50_s is not None else ""
        parts.append(f"TTFT p50 {snap.ttft_p50_s:.2f} s{itl} ({snap.ttft_count:,} so far{last})")
    if not closed and snap.waiting_first_s is not None and snap.waiting_first_s >= 1.0:
        parts.append(f"oldest in flight waiting {snap.waiting_first_s:.0f} s for its first token")
    if not closed and phase.end_ns is not None:
        left = (phase.end_ns - snap.t_ns) / NS
        parts.append(
            f"{clock_text(left)} left" if left > 0 else f"no new requests; {snap.sent - snap.done} in flight finishing"
        )
    elif not closed and snap.planned and snap.done:
        elapsed = (snap.t_ns - phase.start_ns) / NS
        parts.append(f"~{clock_text(elapsed * (snap.planned - snap.done) / snap.done)} left at this pace")
    return parts + _engine(snap)


def _engine(snap: Snapshot, lead: str = "engine: ") -> list[str]:
    values = snap.engine
    if values is None:
        return []
    shown = []
    if "num_requests_running" in values:
        shown.append(f"running {values['num_requests_running']:g}")
    if "num_requests_waiting" in values:
        shown.append(f"waiting {values['num_requests_waiting']:g}")
    if "kv_cache_usage_perc" in values:
        shown.append(f"KV {values['kv_cache_usage_perc'] * 100:.0f}%")
    if "process_rss_bytes" in values:
        shown.append(f"RSS {values['process_rss_bytes'] / 2**20:,.0f} MiB")
    if not shown:
        return []
    age = f" (/metrics {snap.engine_age_s:.0f} s ago)" if (snap.engine_age_s or 0) >= STALE_ENGINE_S else ""
    return [lead + ", ".join(shown) + age]


VIEWS: dict[str, Callable[[Snapshot, int, bool], list[str]]] = {
    COLD: _cold,
    WINDOW: _window,
    DRAIN: _drain,
    REQUESTS: _requests,
}


def clock_text(seconds: float) -> str:
    """0:07, 12:30, 1:02:03."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
