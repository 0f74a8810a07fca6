"""The steady state of a run, found, not assumed (docs/scenarios.md, "Steady state"): MSER-5 on the run's
per-second series leaves out its warm-up and its drain, and the rates over the window left are claimed
beside the whole run's, which stay as they are.

**The series.** One value a second from the window's origin (a load run's schedule start, a throughput
level's first send): the output tokens (usage.completion_tokens) of the successful requests that ended in
that second, or, where a route has no output tokens (embeddings, rerank), the successful requests that
ended in it. It is `metrics.uncertainty.per_second`'s series, the one the rates' intervals are made of:
round(duration) seconds, the last, partial second counted whole if it is at least half a second.

**MSER-5** (White 1997, "An effective truncation heuristic for bias reduction in simulation output";
White, Cobb and Spratt 2000): the n values are cut into b = floor(n / 5) consecutive batches of 5 seconds
from the series' start (its last n mod 5 seconds in no batch), Z_1 .. Z_b the batches' means. For each
truncation d = 0, 1, ..., floor(b / 2) (never more than half the batches, the usual bound: a minimum past
the middle says the series has no steady state, not that it is mostly warm-up), with Zbar(d) the mean of
Z_(d+1) .. Z_b,

    MSER(d) = sum over j > d of (Z_j - Zbar(d))^2 / (b - d)^2,

the squared standard error of Zbar(d) (with b - d in place of b - d - 1 in the variance). The warm-up is
the first 5 d* seconds, d* the smallest d with the least MSER(d): a flat series is not truncated (every
MSER(d) is 0, d* = 0); a ramp is cut where the batches stop rising.

**The drain** is MSER-5 applied the same way to the series after its warm-up, reversed: its batches are
counted from the last second back, and the drain is the last 5 e* seconds (e* at most half of those
batches). The steady window is [5 d*, n - 5 e*) seconds from the origin; with no drain it ends where the
run ends (its exact duration, the last second partial).

**Too short.** A series of fewer than `MIN_BATCHES` batches (10: 50 seconds) gets no window: the steady
claims are then one fact, `<prefix>.steady.unavailable`, saying why.

**The claims** (`steady_claims`): `<prefix>.steady.method` (MSER-5, the series, the seconds left out),
`<prefix>.steady.start_s` and `<prefix>.steady.end_s` (seconds from the origin), and the rates over the
window: `<prefix>.steady.output_tokens_per_s` (output tokens of the successful requests ending in the
window's seconds / its length) and `<prefix>.steady.request_throughput_rps` (those requests / its length),
each with `metrics.uncertainty.rate_interval` over the window's own per-second series. Pure and
deterministic, standard library and msgspec only: `verify` recomputes every one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from loadproof.metrics.claims import Claim, fact, number
from loadproof.metrics.figures import Span
from loadproof.metrics.latency import succeeded
from loadproof.metrics.uncertainty import per_second, rate_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

BATCH_S = 5  # MSER-5: batches of five values (seconds)
MIN_BATCHES = 10  # fewer batches than this: no window (too short to tell warm-up from noise)
METHOD = "MSER-5"
SPAN_COLOUR = "#d8ecd9"


class SteadyWindow(msgspec.Struct, frozen=True):
    """A series' steady window: its seconds [start, end) of `seconds`, the warm-up and drain left out."""

    start: int  # the first second kept (5 x the warm-up's batches)
    end: int  # one past the last second kept
    seconds: int  # the series' length

    @property
    def warmup_s(self) -> int:
        return self.start

    @property
    def drain_s(self) -> int:
        return self.seconds - self.end


def mser_truncation(series: Sequence[float], batch: int = BATCH_S) -> int:
    """MSER's truncation d* of a series, in batches from its start: the smallest d <= b // 2 minimizing
    sum_{j > d} (Z_j - Zbar(d))^2 / (b - d)^2 over the b = len // batch batch means Z (0 for fewer than two
    batches). One pass from the last batch back, with Welford's running mean and sum of squares."""
    b = len(series) // batch
    means = [sum(series[j * batch : (j + 1) * batch]) / batch for j in range(b)]
    best, best_d = float("inf"), 0
    count, mean, squares = 0, 0.0, 0.0
    for d in range(b - 1, -1, -1):
        count += 1
        delta = means[d] - mean
        mean += delta / count
        squares += delta * (means[d] - mean)
        if d <= b // 2:
            value = squares / (count * count)
            if value <= best:  # ties: the smaller d (fewer seconds left out)
                best, best_d = value, d
    return best_d


def steady_window(series: Sequence[float], drain: int | None = None) -> SteadyWindow | None:
    """The steady window of a per-second series: MSER-5's warm-up from the start, then its drain from the
    end of what is left (module doc); with `drain` (the second the drain is known to begin: an open loop's last
    send), the window ends there and MSER-5 finds the warm-up on the seconds before it. None for fewer than
    `MIN_BATCHES` batches (before the drain)."""
    n = len(series)
    if drain is not None:
        end = max(0, min(n, drain))
        if end // BATCH_S < MIN_BATCHES:
            return None
        return SteadyWindow(BATCH_S * mser_truncation(series[:end]), end, n)
    if n // BATCH_S < MIN_BATCHES:
        return None
    start = BATCH_S * mser_truncation(series)
    rest = list(series[start:])
    rest.reverse()
    end = n - BATCH_S * mser_truncation(rest)
    return SteadyWindow(start, end, n)


def too_short(seconds: int) -> str:
    """Why a series of `seconds` gets no window."""
    return (
        f"the per-second series holds {seconds} s ({seconds // BATCH_S} batches of {BATCH_S} s); {METHOD} needs at "
        f"least {MIN_BATCHES} batches ({MIN_BATCHES * BATCH_S} s) to tell a warm-up from the run's own noise"
    )


def steady_claims(
    prefix: str,
    ends_ns: Sequence[int],
    tokens: Sequence[float] | None,
    origin_ns: int,
    duration_s: float,
    origin: str,
    *,
    requests: bool = True,
    parts: Mapping[str, object] | None = None,
    last_send_ns: int | None = None,
    sends_ns: Sequence[int] | None = None,
) -> list[Claim]:
    """`<prefix>.steady.*` of the successful requests that ended at `ends_ns` with `tokens` output tokens
    each (None: a route without output tokens, whose window is found on the requests), over `duration_s`
    seconds from `origin_ns` (`origin` says what that is, in words); the request rate too where `requests`.
    With `last_send_ns` (an open loop's last send), the drain is known: the window ends at the last whole
    second before it; with `sends_ns` (every send of a rescaled schedule, whose count the design fixed), the
    rates' intervals are conditioned on each batch's sends."""
    if duration_s <= 0 or not ends_ns:
        return []
    counted = [1.0] * len(ends_ns)
    found_on = tokens if tokens is not None and any(tokens) else counted
    what = "output tokens" if found_on is tokens else "successful requests"
    series = per_second(ends_ns, found_on, origin_ns, duration_s)
    drain = None if last_send_ns is None else (last_send_ns - origin_ns) // NS_PER_S
    window = steady_window(series, drain)
    if window is None:
        return [
            fact(
                f"{prefix}.steady.unavailable",
                too_short(len(series) if drain is None else min(len(series), max(0, drain))),
                f"why there is no steady window: {METHOD} on the per-second series of {what} ended, from {origin}",
                parts,
            )
        ]
    start_s = float(window.start)
    end_s = float(window.end) if window.end < window.seconds else duration_s
    length = end_s - start_s
    inside = [
        i
        for i, end in enumerate(ends_ns)
        if window.start <= min(window.seconds - 1, max(0, (end - origin_ns) // NS_PER_S)) < window.end
    ]
    window_origin = origin_ns + window.start * NS_PER_S
    kept = [ends_ns[i] for i in inside]
    window_end_ns = window_origin + round(length * NS_PER_S)
    sent = None if sends_ns is None else [t for t in sends_ns if window_origin <= t < window_end_ns]
    series_text = f"the per-second series of {what} ended, from {origin}"
    warmup = (
        f"{METHOD} (White 1997) on {series_text}: batches of {BATCH_S} s, the warm-up's truncation minimizing "
        "the squared standard error of the remaining batch means' mean, at most half the batches"
    )
    claims = [
        fact(
            f"{prefix}.steady.method",
            f"{METHOD} on {what}/s: {window.warmup_s} s of warm-up and {window.drain_s} s of drain left out",
            f"{warmup}; the drain the same on the rest, reversed"
            if drain is None
            else f"{warmup}, of the seconds before the last send; the drain from the last whole second before the "
            "last send on (an open loop's drain begins when its schedule ends)",
            parts,
        ),
        number(
            f"{prefix}.steady.start_s",
            start_s,
            "s",
            f"the steady window's start, seconds from {origin}: 5 x {METHOD}'s warm-up batches",
            3,
            direction="neither",
            parts=parts,
        ),
        number(
            f"{prefix}.steady.end_s",
            end_s,
            "s",
            f"the steady window's end, seconds from {origin}: the series' end less 5 x {METHOD}'s drain batches "
            "(no drain: the last response's end)"
            if drain is None
            else f"the steady window's end, seconds from {origin}: the last whole second before the last send",
            3,
            direction="neither",
            parts=parts,
        ),
    ]
    if tokens is not None:
        weights = [float(tokens[i]) for i in inside]
        value = sum(weights) / length
        claims.append(
            number(
                f"{prefix}.steady.output_tokens_per_s",
                value,
                "tokens/s",
                "sum of usage.completion_tokens of successful requests ending in the steady window's seconds / "
                "its length (end_s - start_s); all streams together",
                1,
                direction="higher",
                parts=parts,
                interval=rate_interval(kept, weights, window_origin, length, value, sent),
            )
        )
    if requests:
        value = len(kept) / length
        claims.append(
            number(
                f"{prefix}.steady.request_throughput_rps",
                value,
                "requests/s",
                "successful requests ending in the steady window's seconds / its length (end_s - start_s)",
                3,
                direction="higher",
                parts=parts,
                interval=rate_interval(kept, [1.0] * len(kept), window_origin, length, value, sent),
            )
        )
    return claims


def open_loop_claims(
    records: Sequence[RequestRecord],
    start_ns: int | None,
    pooling: bool,
    prefix: str,
    *,
    last_send: bool = False,
    conditioned: bool = False,
) -> list[Claim]:
    """An open-loop run's `<prefix>.steady.*`: its successful requests from the schedule's start to the last
    response's end (every request's, as the run's duration), the window found on their output tokens (on the
    requests, for a pooling route). `last_send`: the window ends at the last send (a run that records it,
    `LoadPlan.arrivals_known`); `conditioned`: a rescaled schedule fixed the count, the rates' intervals are
    conditioned on each batch's sends (metrics/conditioning.py)."""
    if not records or start_ns is None:
        return []
    ok = [r for r in records if succeeded(r)]
    duration_s = (max(r.end_ns for r in records) - start_ns) / NS_PER_S
    tokens = None if pooling else [float(r.output_tokens or 0) for r in ok]
    sends = [r.send_ns for r in records if r.send_ns]
    return steady_claims(
        prefix,
        [r.end_ns for r in ok],
        tokens,
        start_ns,
        duration_s,
        "the schedule's start",
        last_send_ns=max(sends) if last_send and sends else None,
        sends_ns=sends if conditioned else None,
    )


def steady_spans(claims: Sequence[Claim], prefix: str, offset_s: float = 0.0, label: str = "") -> list[Span]:
    """The steady window `<prefix>.steady.start_s`..`end_s` among `claims` as a shaded, labelled span, moved
    by `offset_s` (the plot's origin is not the window's); none without a window."""
    by_name = {c.name: c.value for c in claims}
    start, end = by_name.get(f"{prefix}.steady.start_s"), by_name.get(f"{prefix}.steady.end_s")
    if not isinstance(start, float) or not isinstance(end, float):
        return []
    text = label or f"steady window ({METHOD}), {start:g}-{end:.0f} s"
    return [Span(start + offset_s, end + offset_s, text, SPAN_COLOUR)]


__all__ = [
    "BATCH_S",
    "METHOD",
    "MIN_BATCHES",
    "SteadyWindow",
    "mser_truncation",
    "open_loop_claims",
    "steady_claims",
    "steady_spans",
    "steady_window",
    "too_short",
]
