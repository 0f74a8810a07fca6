"""Arrivals whose count the design fixed, and the intervals conditioned on them (docs/scenarios.md, "Intervals";
measured in docs/benchmarks.md, section 12).

`run load --rate R -n N` sends vLLM's schedule: N Poisson gaps rescaled so that the last send is at N/R. The
run's count and span are fixed, so the run as a whole always offers exactly R, while its batches still see the
arrivals' bursts: the batch means of a latency, an outcome or a per-second rate vary with how many requests
arrived in each batch, but those counts sum to the design's total, so that part of their spread does not
reach the run's figure. Intervals made from the raw batch means are then too wide for such a run (they held
the truth in 98-100% of runs where they claim 95%). For such a run the intervals are conditioned on each
batch's arrivals (`intervals.batch_spread`): the batch means regressed on the batch means of a covariate whose
total the design fixed, and the residual's variance, on k - 2 degrees of freedom, used in place of the raw one:

- for a value of a request (a TTFT, an E2E, an SLO outcome, each of a request's ITL gaps), its request's
  **arrival gap**: its send less the previous send (the first's, less the schedule's start), whose sum over
  the run is the schedule's span;
- for a rate's per-second series, the **sends** in each second, whose sum is the count.

A **whole run's rate** (requests, tokens or good requests a second: a sum over the run / its duration, the
schedule's start to the last end) is conditioned otherwise (`RunCount`, where the run also records
`LoadPlan.ends_known`): every request ends inside the run, so the count of ends is fixed too, and the per-second
series is regressed on each second's ends, which leaves what the requests carried (their tokens, their SLO
outcome); the run's length is the schedule's span, fixed, plus its drain (the last end less the last send), which
the batches cannot see, so the drain's variance (`drain_law`) is added. Regressed on the sends instead, the
residual kept the requests carried across the batches' edges, which cancel over the run, and the interval was too
wide (a requests/s interval held the truth in 99% of runs). ITL, whose gaps are spread over each request's
decode, is batched by the second each gap ended and conditioned on the same ends (`metrics/time_batches.py`).

`fixed_count` says where that holds: a rescaled schedule sent whole (every planned request sent; a run that
`--until-precision` or an interruption ended early sent fewer, so its count was not fixed), in a run that
records it (`LoadPlan.arrivals_known`: a bundle published before keeps the intervals it was published with).
Pure and deterministic (standard library only): `verify` recomputes the same.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S


def fixed_count(plan: Any, records: Sequence[RequestRecord]) -> bool:
    """Whether the run's count and span were fixed by a rescaled schedule sent whole (see the module doc); a
    plan without these fields (a replay's) is not."""
    return (
        bool(getattr(plan, "arrivals_known", False))
        and bool(getattr(plan, "rescaled", False))
        and not getattr(plan, "until_precision", {})
        and len(records) == plan.planned_requests
        and all(r.send_ns for r in records)
    )


def sends_ns(records: Sequence[RequestRecord]) -> list[int]:
    """Each request's send, in the records' order."""
    return [r.send_ns for r in records]


def arrival_gaps(records: Sequence[RequestRecord], start_ns: int) -> list[float]:
    """Each record's arrival gap in seconds, in the records' order: its send less the previous send in the
    order they were sent (the first's, less `start_ns`, the schedule's start); their sum is the span of the
    sends from the start."""
    order = sorted(range(len(records)), key=lambda i: (records[i].send_ns, i))
    gaps = [0.0] * len(records)
    previous = start_ns
    for i in order:
        gaps[i] = (records[i].send_ns - previous) / NS_PER_S
        previous = records[i].send_ns
    return gaps


# the drain's model: the latencies of the last tenth of the requests sent (at least TAIL_MIN), on a grid of points
TAIL_SHARE = 10
TAIL_MIN = 100
DRAIN_GRID = 400


@dataclass(frozen=True)
class DrainLaw:
    """The drain D = the last end - the last send under `drain_law`'s model, in seconds: its mean and variance."""

    mean_s: float
    var_s2: float


@dataclass(frozen=True)
class RunCount:
    """What a rescaled schedule sent whole fixes for a whole run's rate and for ITL (see the module doc): every
    record's end (their count is the design's), the drain's law (`drain_law`), and the run's start and duration
    (the schedule's start to the last end), over which the per-second series are made."""

    ends_ns: list[int]
    drain: DrainLaw
    start_ns: int
    duration_s: float


def run_count(plan: Any, records: Sequence[RequestRecord], start_ns: int) -> RunCount | None:
    """The run's `RunCount` from `start_ns`, the schedule's start, where the design fixed its count (`fixed_count`)
    and the run records that its whole-run rates and ITL use it (`LoadPlan.ends_known`); None otherwise."""
    if not (getattr(plan, "ends_known", False) and fixed_count(plan, records)):
        return None
    ends = [r.end_ns for r in records]
    return RunCount(ends, drain_law(records), start_ns, (max(ends) - start_ns) / NS_PER_S)


def drain_law(records: Sequence[RequestRecord]) -> DrainLaw:
    """The law of the drain D = the last end - the last send S under a model: each request sent within reach of
    S ends at its send plus a latency drawn independently from the latencies (end - send) of the last tenth of
    the requests sent, at least `TAIL_MIN` (the load the run ended in: the last quarter's law, taken from longer
    before, was wider than the drain's, and fewer than 100 understate the law's upper tail, which the drain's
    spread is made of; benchmarks.md, section 12), so P(D <= d) = the product over those requests of
    F(d + S - send), F that law's distribution function. E[D] and E[D^2] integrate the tail P(D > d) (times 2d
    for the second) by the midpoint rule on `DRAIN_GRID` points from 0 to the largest latency. Both 0 for fewer
    than two requests or no positive latency."""
    if len(records) < 2:
        return DrainLaw(0.0, 0.0)
    by_send = sorted(records, key=lambda r: (r.send_ns, r.end_ns))
    last = by_send[-1].send_ns
    tail = by_send[-max(TAIL_MIN, len(by_send) // TAIL_SHARE) :]
    latencies = sorted((r.end_ns - r.send_ns) / NS_PER_S for r in tail)
    top = latencies[-1]
    if top <= 0:
        return DrainLaw(0.0, 0.0)
    leads = sorted((last - r.send_ns) / NS_PER_S for r in by_send if (last - r.send_ns) / NS_PER_S < top)
    step = top / DRAIN_GRID
    first = second = 0.0
    for j in range(DRAIN_GRID):
        d = (j + 0.5) * step
        below = 1.0  # P(D <= d)
        for lead in leads:
            if lead + d >= top:
                break  # later leads: F is 1
            below *= bisect.bisect_right(latencies, lead + d) / len(latencies)
            if below == 0.0:
                break
        first += (1.0 - below) * step
        second += 2.0 * d * (1.0 - below) * step
    return DrainLaw(first, max(0.0, second - first * first))


__all__ = ["DrainLaw", "RunCount", "arrival_gaps", "drain_law", "fixed_count", "run_count", "sends_ns"]
