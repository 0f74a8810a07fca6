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

`fixed_count` says where that holds: a rescaled schedule sent whole (every planned request sent; a run that
`--until-precision` or an interruption ended early sent fewer, so its count was not fixed), in a run that
records it (`LoadPlan.arrivals_known`: a bundle published before keeps the intervals it was published with).
Pure and deterministic (standard library only): `verify` recomputes the same.
"""

from __future__ import annotations

from collections.abc import Sequence
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


__all__ = ["arrival_gaps", "fixed_count", "sends_ns"]
