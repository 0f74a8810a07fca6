"""What a load run gives `sim calibrate` (the load entry's `calibrate`): an open-loop run of loadproof's own, or one
read in from another tool (`loadproof import`), from its records where it has them, else from the figures its file
states (docs/import.md, "Calibrating from imported runs").

From records (each request's send, first token, last token, end):
- a cold TTFT point for each successful request that found the engine idle: no other request in flight from its
  send to its first token (at a low rate most do; their TTFT is a lone prefill's, the client's part included);
- a decode point per concurrency: each successful request of 8 tokens or more decoded at (last - first) /
  (tokens - 1) seconds a token, among as many requests as were in flight on average over its decode (itself
  included, rounded; a request counts from its first token to its last, not while it waits or prefills), at its
  prompt plus half its output as context; each concurrency's median is a point.

From stated figures (no records): the workload's mean prompt with the stated median TTFT as one TTFT point (taken
as a lone prefill's, which it is at a low rate; at a high one the queueing is fitted as prefill cost), and one decode
point at the stated median TPOT among rate x mean E2EL requests (Little's law: those in flight on average), at the
mean prompt plus half the mean output.
"""

from __future__ import annotations

import bisect
from typing import Any

from loadproof.metrics.imported import E2EL, REQUEST_RATE, TPOT, TTFT
from loadproof.predict.points import DecodePoint, RunPoints, TtftPoint
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S

MIN_DECODE_TOKENS = 8


def calibration_points(run: Run) -> RunPoints:
    source = run.manifest.source
    if source is not None and not source.per_request:
        return stated_points(run)
    return record_points(run)


def record_points(run: Run) -> RunPoints:
    points = RunPoints()
    ok = [r for r in run.records if r.ok and r.first_token_ns is not None and r.last_token_ns is not None]
    spans = sorted((r.send_ns, r.end_ns) for r in run.records if r.send_ns)
    starts = [s for s, _ in spans]
    decoding = sorted((r.first_token_ns or 0, r.last_token_ns or 0) for r in ok)
    decode_starts = [s for s, _ in decoding]
    for record in ok:
        first, last = record.first_token_ns or 0, record.last_token_ns or 0
        if _alone(record, spans, starts):
            ttft = (first - record.send_ns) / NS_PER_S
            points.ttft.append(
                TtftPoint(record.prompt_tokens or 0, ttft, f"{run.run_id}/{record.request_id} (idle engine)")
            )
        out = record.output_tokens or 0
        if out >= MIN_DECODE_TOKENS and last > first:
            batch = max(1, round(_in_flight(first, last, decoding, decode_starts)))
            per_token = (last - first) / NS_PER_S / (out - 1)
            key = (f"{run.run_id} load", batch, 0)
            points.decode.setdefault(key, []).append(((record.prompt_tokens or 0) + out / 2, per_token))
    return points


def _alone(record: RequestRecord, spans: list[tuple[int, int]], starts: list[int]) -> bool:
    """No other request was in flight from `record`'s send to its first token."""
    first = record.first_token_ns or record.end_ns
    others = [
        (s, e)
        for s, e in spans[: bisect.bisect_left(starts, first)]
        if e > record.send_ns and (s, e) != (record.send_ns, record.end_ns)
    ]
    return not others


def _in_flight(t0: int, t1: int, spans: list[tuple[int, int]], starts: list[int]) -> float:
    """The time-average number of `spans` under way over [t0, t1]."""
    covered = sum(max(0, min(e, t1) - max(s, t0)) for s, e in spans[: bisect.bisect_left(starts, t1)])
    return covered / (t1 - t0)


def stated_points(run: Run) -> RunPoints:
    source = run.manifest.source
    assert source is not None
    stated = {(f.figure, f.stat): f.value for f in source.stated}
    plan = run.manifest.plan or {}
    prompt, output = _mean(plan.get("input_tokens")), _mean(plan.get("output_tokens"))
    points = RunPoints()
    said = f"{run.run_id}: stated by {source.tool}"
    ttft = stated.get((TTFT, "p50"))
    if ttft is not None and prompt:
        points.ttft.append(TtftPoint(round(prompt), ttft, f"{said} (median TTFT)"))
    tpot = stated.get((TPOT, "p50"), stated.get((TPOT, "mean")))
    e2el, rate = stated.get((E2EL, "mean")), stated.get((REQUEST_RATE, ""))
    if tpot and e2el and rate and prompt and output:
        batch = max(1, round(rate * e2el))
        points.windows.append(
            DecodePoint(
                batch, prompt + output / 2, tpot, f"{said} (median TPOT among {batch} in flight: rate x mean E2EL)"
            )
        )
    return points


def _mean(lengths: Any) -> float | None:
    """A plan's length's mean (fixed a, uniform a..b, normal or lognormal about a); None where it does not say."""
    if not isinstance(lengths, dict) or not isinstance(lengths.get("a"), (int, float)):
        return None
    kind, a, b = lengths.get("kind"), float(lengths["a"]), float(lengths.get("b") or 0.0)
    if kind == "uniform":
        return (a + b) / 2
    return a if kind in ("fixed", "normal", "lognormal", "skew_normal") and a > 0 else None
