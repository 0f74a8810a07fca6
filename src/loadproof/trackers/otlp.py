"""`loadproof track RUN --otlp FOLDER|URL`: a run as OpenTelemetry traces and metrics in the GenAI semantic
conventions, as OTLP JSON (the `otel` extra: the OpenTelemetry SDK and its OTLP JSON encoder).

The conventions are those of OpenTelemetry's semantic conventions 1.4x, `gen_ai.*` (the names OpenTelemetry's own
Python GenAI instrumentation emits, opentelemetry-util-genai); they are in development, and the GenAI repository's
later renames (`gen_ai.client.inference.*`) are not emitted (docs/trackers.md).

Traces: one trace per run. Its root span, `loadproof <scenario>` (INTERNAL), covers the first send to the last
end, with `loadproof.run_id`, `loadproof.scenario`, `loadproof.source` and `loadproof.verdict`. Under it one
CLIENT span per request sent, named `{gen_ai.operation.name} {gen_ai.request.model}`, from its send to its end
(the run's clock placed on the wall clock by the manifest's anchor), with `gen_ai.operation.name` (chat for a
route that carries messages, text_completion for one that takes a prompt, embeddings for one that embeds),
`gen_ai.provider.name` (the engine, where the run recorded it; `_OTHER` otherwise), `gen_ai.request.model`,
`gen_ai.request.max_tokens`, `gen_ai.request.stream`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
`gen_ai.usage.cache_read.input_tokens` and `gen_ai.usage.reasoning.output_tokens` (where the server counted
them), `gen_ai.response.finish_reasons`, `gen_ai.response.time_to_first_chunk` (TTFT, seconds), `server.address`
(sanitized as `publish` does: `<host>` or `<ip>`) and `server.port`, `loadproof.request_id`, and for a failure
`error.type` (its error kind) and an ERROR status. No prompt, answer or error message leaves.

Metrics (histograms with the conventions' bucket boundaries): `gen_ai.client.operation.duration` (s, every
request sent; `error.type` on failures), `gen_ai.client.token.usage` ({token}, `gen_ai.token.type` input or
output), `gen_ai.client.operation.time_to_first_chunk` (s, successful streamed requests) and
`gen_ai.client.operation.time_per_output_chunk` (s, each gap between token-bearing chunks); and the run's claims
as the gauge `loadproof.claim` (`loadproof.claim.name`, `loadproof.claim.unit`, `loadproof.claim.bound`: value,
low or high of its interval). A data point's time is when it was exported; the run's times are on its spans.

Where: an http(s) URL is an OTLP/HTTP receiver's base (a collector's :4318): POST `<URL>/v1/traces` and
`<URL>/v1/metrics`, `Content-Type: application/json`. Anything else is a folder, new or empty, that gets
`traces.jsonl` and `metrics.jsonl`, one OTLP JSON export request a line (the collector file exporter's layout;
`run replay --format otel` reads the traces).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loadproof.errors import UsageError
from loadproof.metrics.latency import succeeded, ttft_ns
from loadproof.protocol.routes import ROUTES
from loadproof.publish.fields import HOST
from loadproof.publish.sanitize import Sanitizer
from loadproof.records import RequestRecord
from loadproof.trackers.source import TrackedRun
from loadproof.units import NS_PER_S

TRACES, METRICS = "traces.jsonl", "metrics.jsonl"
SPANS_PER_REQUEST = 1000  # spans per export request (a line of traces.jsonl, a POST)
POST_TIMEOUT_S = 30.0
# the conventions' ExplicitBucketBoundaries (as opentelemetry-util-genai sets them)
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = tuple(4**i for i in range(14))  # 1, 4, 16, ... 67,108,864
OTHER_PROVIDER = "_OTHER"


@dataclass(frozen=True)
class Sent:
    where: str  # the folder written, or the URL posted to
    spans: int
    metrics: int


def check_target(target: str) -> None:
    """Before anything is read: an http(s) URL with a host, or a folder that is new or empty."""
    if target.startswith(("http://", "https://")):
        if not urlsplit(target).hostname:
            raise UsageError(f"--otlp {target}: a URL without a host")
        return
    folder = Path(target).expanduser()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"--otlp {target}: give a new or empty folder (or an http(s) URL of an OTLP/HTTP receiver)")


def operation(endpoint: str) -> tuple[str, bool]:
    """`gen_ai.operation.name` of a request on `endpoint`, and whether it streams (its route's traits, never its
    name; a route this loadproof does not know is taken for a streamed chat)."""
    if endpoint not in ROUTES:
        return "chat", True
    route = ROUTES.get(endpoint)
    if route.verb == "embed":
        return "embeddings", route.streams
    if not route.generates:
        return route.verb, route.streams
    return ("chat" if route.conversational else "text_completion"), route.streams


def server(tracked: TrackedRun) -> dict[str, Any]:
    """`server.address` (sanitized) and `server.port` of the run's target URL; empty without one."""
    url = tracked.run.manifest.target.url
    parts = urlsplit(url) if url else None
    if parts is None or not parts.hostname:
        return {}
    sanitizer = Sanitizer()
    sanitizer.learn(parts.hostname, HOST)
    out: dict[str, Any] = {"server.address": sanitizer.value(parts.hostname, HOST)}
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return out
    out["server.port"] = port
    return out


def run_attributes(tracked: TrackedRun) -> dict[str, Any]:
    """What every request of the run shares: its provider and its (sanitized) server."""
    return {"gen_ai.provider.name": tracked.engine_kind or OTHER_PROVIDER, **server(tracked)}


def span_attributes(tracked: TrackedRun, record: RequestRecord, shared: dict[str, Any]) -> dict[str, Any]:
    """A request's span attributes (see the module's docstring); `shared`: `run_attributes`."""
    name, streams = operation(record.endpoint)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": name,
        "gen_ai.request.model": record.model or tracked.model or "",
        "gen_ai.request.stream": streams,
        **shared,
        "loadproof.request_id": record.request_id,
    }
    optional = {
        "gen_ai.request.max_tokens": record.planned_output_tokens,
        "gen_ai.usage.input_tokens": record.prompt_tokens,
        "gen_ai.usage.output_tokens": record.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": record.cached_tokens,
        "gen_ai.usage.reasoning.output_tokens": record.engine_reasoning_tokens or record.reasoning_tokens,
    }
    attrs.update({k: v for k, v in optional.items() if v is not None})
    if record.finish_reason:
        attrs["gen_ai.response.finish_reasons"] = [record.finish_reason]
    if succeeded(record) and attrs["gen_ai.request.stream"]:
        attrs["gen_ai.response.time_to_first_chunk"] = ttft_ns(record) / NS_PER_S
    if not record.ok:
        attrs["error.type"] = record.error_kind or (str(record.http_status) if record.http_status else "_OTHER")
    return attrs


def export(tracked: TrackedRun, target: str) -> Sent:
    """The run's traces and metrics as OTLP JSON, to the folder or the receiver `target` names."""
    check_target(target)
    try:
        # optional: the loadproof[otel] extra (OpenTelemetry's SDK and its OTLP JSON encoder)
        from opentelemetry.exporter.otlp.json.common.metrics_encoder import encode_metrics

        # optional: the same extra
        from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
    except ImportError:
        raise UsageError("--otlp needs the OpenTelemetry SDK: pip install 'loadproof[otel]'") from None
    if tracked.run.manifest.clock_anchor is None:
        raise UsageError(f"{tracked.path}: the run has no clock anchor, so its requests cannot be placed in time")
    spans = _spans(tracked)
    traces = [encode_spans(spans[i : i + SPANS_PER_REQUEST]).to_dict() for i in range(0, len(spans), SPANS_PER_REQUEST)]
    data = _metrics(tracked)
    metrics = [encode_metrics(data).to_dict()]
    points = sum(len(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics)
    if target.startswith(("http://", "https://")):
        base = target.rstrip("/")
        for doc in traces:
            _post(f"{base}/v1/traces", doc, target)
        for doc in metrics:
            _post(f"{base}/v1/metrics", doc, target)
    else:
        folder = Path(target).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        _write(folder / TRACES, traces)
        _write(folder / METRICS, metrics)
    return Sent(target, len(spans), points)


def _write(path: Path, docs: Sequence[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for doc in docs:
            out.write(json.dumps(doc, separators=(",", ":")) + "\n")


def _post(url: str, doc: dict[str, Any], target: str) -> None:
    body = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as reply:
            reply.read()
    except urllib.error.HTTPError as exc:
        raise UsageError(f"--otlp {target}: {url} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"--otlp {target}: no OTLP/HTTP receiver answers there ({reason})") from None


def _resource(tracked: TrackedRun) -> Any:
    from opentelemetry.sdk.resources import Resource  # optional: the otel extra, found by `export`

    version = (tracked.run.manifest.versions or {}).get("loadproof")
    attrs = {"service.name": "loadproof", "loadproof.run_id": tracked.run_id, "loadproof.scenario": tracked.scenario}
    if version:
        attrs["service.version"] = version
    return Resource.create(attrs)


def _sent(tracked: TrackedRun) -> Iterator[RequestRecord]:
    return (r for r in tracked.run.records if r.send_ns and r.end_ns)


def _spans(tracked: TrackedRun) -> list[Any]:
    """The run's spans, finished, in the order they started (the run's first)."""
    from opentelemetry import trace  # optional: the otel extra, found by `export`
    from opentelemetry.sdk.trace import TracerProvider  # optional: the otel extra, found by `export`
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # optional: the otel extra, found by `export`

    # optional: the otel extra, found by `export`
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=_resource(tracked))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("loadproof.trackers")
    records = sorted(_sent(tracked), key=lambda r: (r.send_ns, r.request_id))
    wall = tracked.wall_ns
    start = wall(records[0].send_ns) if records else None
    end = wall(max(r.end_ns for r in records)) if records else None
    root = tracer.start_span(f"loadproof {tracked.scenario}", start_time=start)
    root.set_attributes({"loadproof.run_id": tracked.run_id, "loadproof.scenario": tracked.scenario})
    root.set_attribute("loadproof.source", tracked.source)
    if tracked.verdict is not None:
        root.set_attribute("loadproof.verdict", tracked.verdict)
    parent = trace.set_span_in_context(root)
    shared = run_attributes(tracked)
    for record in records:
        attrs = span_attributes(tracked, record, shared)
        name = f"{attrs['gen_ai.operation.name']} {attrs['gen_ai.request.model']}".strip()
        span = tracer.start_span(
            name, context=parent, kind=trace.SpanKind.CLIENT, attributes=attrs, start_time=wall(record.send_ns)
        )
        if not record.ok:
            span.set_status(trace.Status(trace.StatusCode.ERROR, attrs["error.type"]))
        span.end(end_time=wall(record.end_ns))
    root.end(end_time=end)
    provider.shutdown()
    finished = list(memory.get_finished_spans())
    return finished[-1:] + finished[:-1]  # the root ended last


def _metrics(tracked: TrackedRun) -> Any:
    """The run's GenAI histograms and its claims' gauge, collected once."""
    from opentelemetry.sdk.metrics import MeterProvider  # optional: the otel extra, found by `export`
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # optional: the otel extra, via `export`

    reader = InMemoryMetricReader()
    provider = MeterProvider(resource=_resource(tracked), metric_readers=[reader])
    meter = provider.get_meter("loadproof.trackers")
    duration = meter.create_histogram(
        "gen_ai.client.operation.duration",
        "s",
        "GenAI operation duration",
        explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
    )
    usage = meter.create_histogram(
        "gen_ai.client.token.usage",
        "{token}",
        "Number of input and output tokens used",
        explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
    )
    first = meter.create_histogram(
        "gen_ai.client.operation.time_to_first_chunk",
        "s",
        "Time to receive the first chunk",
        explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
    )
    per_chunk = meter.create_histogram(
        "gen_ai.client.operation.time_per_output_chunk",
        "s",
        "Time per output chunk after the first",
        explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
    )
    shared = run_attributes(tracked)
    for record in _sent(tracked):
        attrs = span_attributes(tracked, record, shared)
        common = {k: attrs[k] for k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")}
        common.update({k: attrs[k] for k in ("server.address", "server.port", "error.type") if k in attrs})
        duration.record((record.end_ns - record.send_ns) / NS_PER_S, common)
        if record.prompt_tokens is not None:
            usage.record(record.prompt_tokens, {**common, "gen_ai.token.type": "input"})
        if record.output_tokens is not None:
            usage.record(record.output_tokens, {**common, "gen_ai.token.type": "output"})
        if "gen_ai.response.time_to_first_chunk" in attrs:
            first.record(attrs["gen_ai.response.time_to_first_chunk"], common)
            for gap in record.itl_ns():
                per_chunk.record(gap / NS_PER_S, common)
    gauge = meter.create_gauge("loadproof.claim", "", "a figure or count of the run's claims.json, and its interval")
    for claim in tracked.claims:
        number = claim.number
        if number is None:
            continue
        labels = {"loadproof.claim.name": claim.name, "loadproof.claim.unit": claim.unit}
        gauge.set(number, {**labels, "loadproof.claim.bound": "value"})
        if claim.interval is not None:
            gauge.set(claim.interval.low, {**labels, "loadproof.claim.bound": "low"})
            gauge.set(claim.interval.high, {**labels, "loadproof.claim.bound": "high"})
    data = reader.get_metrics_data()
    provider.shutdown()
    return data
