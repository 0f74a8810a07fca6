"""Runs that stop when they know enough (`run load --until-precision ttft_p99=5%,itl_p50=2%`; docs/scenarios.md,
"Until a precision"): the figures a precision may name, each one's value and 95% interval from records, the
stopping rule, and the claims that say what was asked, what was reached and what it took.

- A figure is `<latency>_<stat>`, a latency of metrics/latency.py (`ttft`, `itl`, `tpot`, `e2el`) and one of
  `p50`, `p90`, `p95`, `p99`, `mean`, or `attainment` (SLO attainment, with --slo). Its value and interval are
  computed exactly as the published claim's (`load.ttft_s.p99`, `load.slo_attainment_pct`): the same values
  (`samples_ns`, `slo_values`) through the same functions (metrics/uncertainty.py), so the interval that
  stopped a run is the interval a claim of the same records publishes.
- Its precision is the interval's relative half-width, (high - low) / 2 / |value| x 100.
- The rule: a figure is precise enough when that half-width is at most the percent asked and it rests on
  enough: a percentile on at least `min_count(q)` values (the fewest for which its two-sided 95% interval
  exists: a p99 needs 368), and every figure on at least `MIN_REQUESTS` (100) values and successful requests
  (fewer, and a percentile's interval takes its values as independent: metrics/dependence.py) and, for a
  percentile, on at least `min_count(q)` of them (an ITL pools a request's gaps: a handful of requests can give
  hundreds of near-equal gaps). A run stops (the `precision_stop` event, with the records it read) once every
  figure named is.
- The claims (`precision_claims`): per figure the precision asked, reached (of every record of the run: the
  published interval) and at the stop (of the records the decision read, the first `records` of
  requests.jsonl); the requests and the time it took; how the run ended; a verdict, PASS only where every
  figure reached its precision (over the records the stop decision read, or over every record), so a run that
  ran to its ceiling without it is no pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, fact, number
from loadproof.metrics.dependence import MIN_VALUES
from loadproof.metrics.distribution import PERCENTILES, summarize
from loadproof.metrics.intervals import Interval, min_count
from loadproof.metrics.latency import samples_ns, succeeded
from loadproof.metrics.slo import meets, slo_values
from loadproof.metrics.uncertainty import share_interval, stat_interval
from loadproof.records import RequestRecord
from loadproof.rundir import Event
from loadproof.units import NS_PER_S

LATENCIES = {"ttft": "ttft_s", "itl": "itl_s", "tpot": "tpot_s", "e2el": "e2el_s"}  # name -> metrics/latency.py's
STATS = ("p50", "p90", "p95", "p99", "mean")
ATTAINMENT = "attainment"
FIGURES = tuple(f"{latency}_{stat}" for latency in LATENCIES for stat in STATS) + (ATTAINMENT,)
# no figure stops a run on fewer successful requests (nor values): below it a percentile's interval takes its values
# as independent (metrics/dependence.py), too narrow for a loaded engine's correlated latencies
MIN_REQUESTS = MIN_VALUES
STOP_EVENT = "precision_stop"
PREFIX = "load.precision"


@dataclass(frozen=True)
class Estimate:
    """A figure of some records: its value (s, or % for attainment), 95% interval, and what it rests on."""

    figure: str
    value: float | None  # None: no value yet
    interval: Interval | None  # None: too few values for one
    values: int  # the values it is computed from (an ITL's gaps)
    requests: int  # the successful requests they come from
    minimum: int  # the fewest values and successful requests before it may stop a run

    @property
    def relative_pct(self) -> float | None:
        """The interval's half-width over the value, in percent (None: no interval, or a value of 0)."""
        if self.interval is None or self.value is None or self.value == 0:
            return None
        return (self.interval.high - self.interval.low) / 2 / abs(self.value) * 100

    @property
    def enough(self) -> bool:
        return self.values >= self.minimum and self.requests >= self.minimum

    def reached(self, asked_pct: float) -> bool:
        """Precise enough: on enough values and requests, its relative half-width at most `asked_pct`."""
        relative = self.relative_pct
        return self.enough and relative is not None and relative <= asked_pct

    def evidence(self, asked_pct: float) -> str:
        """In words: `ttft_p99 0.512 s, 95% interval [0.49, 0.53] (+/-3.9%) of 412 values from 412 requests,
        asked 5% (at least 368)`."""
        unit = "%" if self.figure == ATTAINMENT else " s"
        if self.value is None:
            return f"{self.figure}: no value, asked {asked_pct:g}%"
        what = f"{self.figure} {self.value:.6g}{unit}"
        relative = self.relative_pct
        if self.interval is None or relative is None:
            what += ", no 95% interval"
        else:
            what += f", 95% interval [{self.interval.low:.6g}, {self.interval.high:.6g}] (+/-{relative:.2f}%)"
        return (
            f"{what} of {self.values} values from {self.requests} successful requests, asked +/-{asked_pct:g}% "
            f"(on at least {self.minimum} of each)"
        )


def minimum_of(figure: str) -> int:
    """The fewest values and successful requests `figure` may stop a run on (`MIN_REQUESTS`, or a percentile's
    `min_count` where that is more: 368 for a p99)."""
    stat = figure.rsplit("_", 1)[-1]
    return max(MIN_REQUESTS, min_count(PERCENTILES[stat] / 100)) if stat in PERCENTILES else MIN_REQUESTS


def estimates(records: Sequence[RequestRecord], asked: Mapping[str, float], slo: Mapping[str, float]) -> list[Estimate]:
    """Each figure of `asked` over `records` (in the order they were recorded), as its claim computes it."""
    ok = sum(succeeded(r) for r in records)
    values = samples_ns(list(records)) if any(f != ATTAINMENT for f in asked) else {}
    out = []
    for figure in asked:
        minimum = minimum_of(figure)
        if figure == ATTAINMENT:
            outcomes = [meets(slo_values(r), dict(slo)) for r in records] if slo else []
            good, n = sum(outcomes), len(records)
            share = 100 * good / n if n else None
            interval = share_interval(good, n, outcomes=outcomes) if slo and n else None  # as slo_claims' own
            out.append(Estimate(figure, share, interval, n, ok, minimum))
            continue
        latency, stat = figure.rsplit("_", 1)
        series = values[LATENCIES[latency]]
        summary = summarize(series)
        if summary is None:
            out.append(Estimate(figure, None, None, 0, ok, minimum))
            continue
        interval = stat_interval(series, stat, 1 / NS_PER_S)  # as latency_claims: the published interval
        out.append(Estimate(figure, summary.stat(stat) / NS_PER_S, interval, len(series), ok, minimum))
    return out


def met(records: Sequence[RequestRecord], asked: Mapping[str, float], slo: Mapping[str, float]) -> bool:
    """The stopping rule: every figure asked is precise enough over `records`."""
    return all(e.reached(asked[e.figure]) for e in estimates(records, asked, slo))


def stop_event(events: Sequence[Event]) -> Event | None:
    """The run's `precision_stop` event: when it stopped sending, and how many records its decision read."""
    return next((e for e in events if e.kind == STOP_EVENT), None)


def decided_records(event: Event, total: int) -> int:
    """How many records the stop decision read: the first that many of requests.jsonl (at most every one)."""
    read = event.fields.get("records")
    return min(total, read) if isinstance(read, int) and not isinstance(read, bool) and read >= 0 else total


def precision_claims(
    records: list[RequestRecord],
    asked: Mapping[str, float],
    slo: Mapping[str, float],
    events: Sequence[Event],
    start_ns: int | None,
) -> list[Claim]:
    """What `--until-precision` asked, what the run reached and what it took (none for a run that asked none)."""
    if not asked:
        return []
    final = estimates(records, asked, slo)
    stop = stop_event(events)
    read = decided_records(stop, len(records)) if stop is not None else None
    at_stop = {e.figure: e for e in estimates(records[:read], asked, slo)} if read is not None else {}
    claims: list[Claim] = []
    criteria: list[Criterion] = []
    for e in final:
        parts = {"figure": e.figure}
        claims.append(
            number(
                f"{PREFIX}.<figure>.asked_pct",
                asked[e.figure],
                "%",
                "the 95% interval's relative half-width asked (--until-precision)",
                2,
                direction="neither",
                parts=parts,
            )
        )
        relative = e.relative_pct
        if relative is not None:
            claims.append(
                number(
                    f"{PREFIX}.<figure>.reached_pct",
                    relative,
                    "%",
                    "(high - low) / 2 / |value| x 100 of the figure's published 95% interval, every record of the run",
                    2,
                    direction="lower",
                    parts=parts,
                )
            )
        stopped = at_stop.get(e.figure)
        if stopped is not None and stopped.relative_pct is not None:
            claims.append(
                number(
                    f"{PREFIX}.<figure>.at_stop_pct",
                    stopped.relative_pct,
                    "%",
                    "(high - low) / 2 / |value| x 100 of the figure's 95% interval over the records the stop "
                    "decision read (the first load.precision.requests_at_stop of requests.jsonl)",
                    2,
                    direction="neither",
                    parts=parts,
                )
            )
        criteria.append(_criterion(e, stopped, asked[e.figure]))
    claims += [
        fact(
            f"{PREFIX}.stopped_by",
            "precision" if stop is not None else "ceiling",
            "precision: every figure asked was precise enough and the schedule stopped sending (the "
            f"{STOP_EVENT} event); ceiling: the schedule ran to --duration-s or --num-requests",
        ),
        count(
            f"{PREFIX}.requests",
            len(records),
            "requests",
            "records of the run: every request sent, those in flight at the stop included",
            direction="lower",
        ),
    ]
    if stop is not None and read is not None:
        claims.append(
            count(
                f"{PREFIX}.requests_at_stop",
                read,
                "requests",
                f"records the stop decision read: those recorded before the {STOP_EVENT} event",
                direction="neither",
            )
        )
        if stop.t_ns is not None and start_ns is not None:
            claims.append(
                number(
                    f"{PREFIX}.decided_s",
                    (stop.t_ns - start_ns) / NS_PER_S,
                    "s",
                    f"the {STOP_EVENT} event - the schedule's start",
                    3,
                    direction="lower",
                )
            )
    return claims + _acceptance(criteria)


def _criterion(final: Estimate, at_stop: Estimate | None, asked_pct: float) -> Criterion:
    """A figure's criterion: PASS when the records the stop decision read met its precision (a run stopped on
    it), or every record of the run does (a run at its ceiling, or whose last records narrowed it)."""
    passed = final.reached(asked_pct) or (at_stop is not None and at_stop.reached(asked_pct))
    evidence = final.evidence(asked_pct)
    if at_stop is not None:
        evidence = f"at the stop: {at_stop.evidence(asked_pct)}; every record of the run: {evidence}"
    return Criterion(final.figure, "PASS" if passed else "FAIL", evidence)


def _acceptance(criteria: list[Criterion]) -> list[Claim]:
    """`load.precision.verdict` and one `load.precision.criteria.<figure>` per figure asked."""
    out = acceptance_claims(PREFIX, criteria)
    return [out[0]] + [replace(c, pattern=f"{PREFIX}.criteria.<figure>") for c in out[1:]]
