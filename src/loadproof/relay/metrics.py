"""The relay's own figures (its /metrics): plain counters, turned into Prometheus text only when read."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class RelayMetrics:
    """Plain counters, turned into Prometheus text only when /metrics is read."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.requests: dict[str, int] = {}
        self.rejected = 0
        self.heartbeats_waiting = 0  # before the engine's first byte of the stream (queueing, prefill)
        self.heartbeats_between = 0  # between two events (a stall mid-stream)
        self.upstream_errors = 0
        self.disconnects = 0
        self.prefill: Any = None  # a disaggregated pair's prefill hop (relay.prefill.PrefillHop), its counters
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, for soak runs
        self.registry.register(_Collector(self))


class _Collector:
    def __init__(self, metrics: RelayMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Any:
        m = self.metrics
        yield GaugeMetricFamily("loadproof_relay_in_flight", "requests being relayed", value=m.in_flight)
        requests = CounterMetricFamily("loadproof_relay_requests", "requests received", labels=["outcome"])
        for outcome, count in sorted(m.requests.items()):
            requests.add_metric([outcome], count)
        yield requests
        heartbeats = CounterMetricFamily("loadproof_relay_heartbeats", "SSE heartbeats sent", labels=["phase"])
        heartbeats.add_metric(["before_first_byte"], m.heartbeats_waiting)
        heartbeats.add_metric(["between_events"], m.heartbeats_between)
        yield heartbeats
        for name, text, value in (
            ("rejected", "requests refused: pool full", m.rejected),
            ("upstream_errors", "upstream failures", m.upstream_errors),
            ("client_disconnects", "clients that left mid-request", m.disconnects),
        ):
            yield CounterMetricFamily(f"loadproof_relay_{name}", text, value=value)
        hop = m.prefill
        if hop is not None:
            for name, text, value in (
                ("prefill_requests", "requests sent to the prefill instance first", hop.requests),
                ("prefill_failures", "prefill hops that failed (the client got the error)", hop.failures),
                ("prefill_seconds", "time of the successful prefill hops, summed", hop.seconds),
                ("kv_bytes", "bytes the KV connector wrote for the prompts, where the relay reads them", hop.kv_bytes),
            ):
                yield CounterMetricFamily(f"loadproof_relay_{name}", text, value=value)
