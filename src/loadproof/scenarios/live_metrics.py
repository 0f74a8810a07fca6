"""The load generator's own figures while a run runs, in Prometheus' terms: what the live endpoint
(`scenarios.live_endpoint`, `--metrics-port`) serves, for a Prometheus server to scrape and a dashboard
(deploy/grafana/loadproof-live.json) to draw.

A `LiveMetrics` watches each run's `LiveStatus` (`LiveStatus.watch`): it is told of every request as it is
sent and as its record ends, on the scenario's side, and keeps plain counts and histogram buckets under a lock;
the endpoint's thread turns them into families only when scraped (`collect`). Counters count over the
endpoint's life, the command's (a rate search's trials, an A/B run's runs add up, as a counter should);
`loadproof_run_info` names the run recording now (its run id and scenario).

The latencies follow the run's own definitions (`metrics.latency`): of successful requests only, TTFT to the
first token, E2E to the last token-bearing chunk, ITL one sample per gap between token-bearing chunks. The
buckets are vLLM's own (its `vllm:time_to_first_token_seconds`, `vllm:inter_token_latency_seconds`,
`vllm:e2e_request_latency_seconds`), finer below 10 ms for ITL, so a dashboard can set the client's view
beside the engine's. With `--workers N` the workers' requests reach the parent only as they end (from their
spooled records, without chunk times): they count, but are never seen in flight and give no ITL sample.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from loadproof.metrics.latency import succeeded
from loadproof.records import RequestRecord
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.live_snapshot import END
from loadproof.units import NS_PER_S

PREFIX = "loadproof_"
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
)  # fmt: skip
OUTCOMES = ("ok", "error", "cancelled")


@dataclass(frozen=True)
class Family:
    """One metric family the endpoint exports: its name (without a counter's `_total`), type, help, labels."""

    name: str
    kind: str  # counter, gauge or histogram
    help: str
    labels: tuple[str, ...] = ()

    @property
    def samples(self) -> tuple[str, ...]:
        """The names its samples have on the wire (what a PromQL expression names)."""
        if self.kind == "counter":
            return (f"{self.name}_total",)
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


RUN_INFO = Family(PREFIX + "run_info", "gauge", "the run recording now (1), or the last one", ("run_id", "scenario"))
RUN_RUNNING = Family(PREFIX + "run_running", "gauge", "1 while a run records its requests, 0 once it has ended")
PLANNED = Family(PREFIX + "requests_planned", "gauge", "requests the current run plans (0: open-ended)")
SENT = Family(PREFIX + "requests_sent", "counter", "requests sent")
COMPLETED = Family(
    PREFIX + "requests_completed",
    "counter",
    "requests whose record ended, by outcome: ok, error (failed) or cancelled",
    ("outcome",),
)
ERRORS = Family(PREFIX + "request_errors", "counter", "failed requests, by the kind of failure", ("kind",))
IN_FLIGHT = Family(PREFIX + "requests_in_flight", "gauge", "requests sent whose record has not ended")
OUTPUT_TOKENS = Family(PREFIX + "output_tokens", "counter", "output tokens of the ended requests (server usage)")
PROMPT_TOKENS = Family(PREFIX + "prompt_tokens", "counter", "prompt tokens of the ended requests (server usage)")
TTFT = Family(PREFIX + "ttft_seconds", "histogram", "time to first token, successful requests")
ITL = Family(
    PREFIX + "itl_seconds", "histogram", "each gap between token-bearing chunks of a successful request, pooled"
)
E2E = Family(PREFIX + "e2e_latency_seconds", "histogram", "send to the last token, successful requests")
FAMILIES = (
    RUN_INFO,
    RUN_RUNNING,
    PLANNED,
    SENT,
    COMPLETED,
    ERRORS,
    IN_FLIGHT,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    TTFT,
    ITL,
    E2E,
)


@dataclass
class Histogram:
    """Cumulative bucket counts over fixed bounds (seconds), values observed in nanoseconds."""

    bounds_s: tuple[float, ...]
    bounds_ns: tuple[int, ...] = ()
    cumulative: list[int] = field(default_factory=list)
    count: int = 0
    sum_ns: int = 0

    def __post_init__(self) -> None:
        self.bounds_ns = tuple(round(b * NS_PER_S) for b in self.bounds_s)
        self.cumulative = [0] * len(self.bounds_s)

    def observe(self, values_ns: list[int]) -> None:
        """Many values at once: sorted, then each bound's count found by bisection (a long stream's gaps cost one
        sort, not a search each)."""
        if not values_ns:
            return
        ordered = sorted(values_ns)
        for i, bound in enumerate(self.bounds_ns):
            self.cumulative[i] += bisect_right(ordered, bound)
        self.count += len(ordered)
        self.sum_ns += sum(ordered)

    def buckets(self) -> list[tuple[str, float]]:
        """(le, cumulative count) pairs, `+Inf` last, as prometheus_client's HistogramMetricFamily takes them."""
        pairs = [(_le(b), float(c)) for b, c in zip(self.bounds_s, self.cumulative)]
        return [*pairs, ("+Inf", float(self.count))]


def _le(bound: float) -> str:
    return repr(float(bound))


class LiveMetrics:
    """The figures the live endpoint serves: a `Watcher` of each run's `LiveStatus` and a prometheus_client
    collector (`collect`). The scenario's side (`started`, `ended`) holds the lock for a few additions; the
    endpoint's thread (`collect`) for a copy."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.status: LiveStatus | None = None
        self.sent = 0
        self.completed = dict.fromkeys(OUTCOMES, 0)
        self.errors: dict[str, int] = {}
        self.output_tokens = self.prompt_tokens = 0
        self.in_flight: dict[int, RequestRecord] = {}
        self.ttft = Histogram(TTFT_BUCKETS_S)
        self.itl = Histogram(ITL_BUCKETS_S)
        self.e2e = Histogram(E2E_BUCKETS_S)

    def attach(self, status: LiveStatus) -> None:
        """Follow `status`'s requests from now on; its run is the one `loadproof_run_info` names."""
        with self.lock:
            self.status = status
        status.watch(self)

    # ----- the scenario's side -----

    def started(self, record: RequestRecord) -> None:
        with self.lock:
            self.sent += 1
            self.in_flight[id(record)] = record

    def ended(self, record: RequestRecord) -> None:
        ok = succeeded(record)
        gaps = record.itl_ns() if ok else []
        with self.lock:
            self.in_flight.pop(id(record), None)
            if record.ok:
                outcome = "ok"
            elif record.error_kind == "cancelled":
                outcome = "cancelled"
            else:
                outcome = "error"
                kind = record.error_kind or "unknown"
                self.errors[kind] = self.errors.get(kind, 0) + 1
            self.completed[outcome] += 1
            self.output_tokens += record.output_tokens or 0
            self.prompt_tokens += record.prompt_tokens or 0
            if ok:
                first, last = record.ttft_ns, record.latency_ns
                self.ttft.observe([first] if first is not None else [])
                self.e2e.observe([last] if last is not None else [])
                self.itl.observe(gaps)

    # ----- the endpoint's side -----

    def collect(self) -> Iterator[Any]:
        """The families, as of now (prometheus_client calls this on each scrape)."""
        with self.lock:
            status = self.status
            for key in [k for k, r in self.in_flight.items() if r.end_ns]:  # ended, never reported: not in flight
                del self.in_flight[key]
            in_flight = len(self.in_flight)
            sent, completed, errors = self.sent, dict(self.completed), dict(self.errors)
            output_tokens, prompt_tokens = self.output_tokens, self.prompt_tokens
            hists = [(h.buckets(), h.sum_ns / NS_PER_S) for h in (self.ttft, self.itl, self.e2e)]
        info = GaugeMetricFamily(RUN_INFO.name, RUN_INFO.help, labels=RUN_INFO.labels)
        if status is not None:
            info.add_metric([status.run_id, status.scenario], 1)
        yield info
        running = status is not None and status.phases[-1].kind != END
        yield GaugeMetricFamily(RUN_RUNNING.name, RUN_RUNNING.help, value=int(running))
        yield GaugeMetricFamily(PLANNED.name, PLANNED.help, value=status.planned if status is not None else 0)
        yield CounterMetricFamily(SENT.name, SENT.help, value=sent)
        by_outcome = CounterMetricFamily(COMPLETED.name, COMPLETED.help, labels=COMPLETED.labels)
        for outcome in OUTCOMES:
            by_outcome.add_metric([outcome], completed[outcome])
        yield by_outcome
        by_kind = CounterMetricFamily(ERRORS.name, ERRORS.help, labels=ERRORS.labels)
        for kind, count in sorted(errors.items()):
            by_kind.add_metric([kind], count)
        yield by_kind
        yield GaugeMetricFamily(IN_FLIGHT.name, IN_FLIGHT.help, value=in_flight)
        yield CounterMetricFamily(OUTPUT_TOKENS.name, OUTPUT_TOKENS.help, value=output_tokens)
        yield CounterMetricFamily(PROMPT_TOKENS.name, PROMPT_TOKENS.help, value=prompt_tokens)
        for family, (buckets, total_s) in zip((TTFT, ITL, E2E), hists):
            yield HistogramMetricFamily(family.name, family.help, buckets=buckets, sum_value=total_s)

    def describe(self) -> list[Any]:
        """Nothing up front: a registry that registers this collector does not call `collect` to learn names."""
        return []


def sample_names() -> set[str]:
    """Every sample name the endpoint can serve: what a dashboard's PromQL may name."""
    return {name for family in FAMILIES for name in family.samples}


def label_names() -> set[str]:
    """Every label the endpoint puts on a sample (a histogram's `le` included)."""
    return {label for family in FAMILIES for label in family.labels} | {"le"}
