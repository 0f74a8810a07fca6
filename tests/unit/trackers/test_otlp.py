"""trackers/otlp.py: a run as OTLP JSON in the GenAI conventions, to a folder and to an OTLP/HTTP receiver (a local
one the test runs), read back with the reader `replay --format otel` uses (workloads/otel_trace.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from loadproof.errors import UsageError
from loadproof.metrics.latency import succeeded, ttft_ns
from loadproof.store.run_dir import load_run
from loadproof.trackers.otlp import METRICS, TRACES, check_target, export
from loadproof.trackers.source import open_run
from loadproof.workloads.otel_trace import read_otel_trace
from tests.unit.trackers.runs import ANCHOR_WALL_NS, PRIVATE_HOST, claims_of, tracked_run


def attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def spans_of(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for doc in lines for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def metrics_of(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        m["name"]: m
        for doc in lines
        for rm in doc["resourceMetrics"]
        for sm in rm["scopeMetrics"]
        for m in sm["metrics"]
    }


def test_each_request_is_a_genai_span_the_otel_reader_reads_back(tmp_path: Path):
    path = tracked_run(tmp_path / "runs")
    sent = export(open_run(path), str(tmp_path / "otel"))
    records = sorted(load_run(path).records, key=lambda r: r.send_ns)
    assert sent.spans == len(records) + 1  # and the run's own span
    trace = read_otel_trace(str(tmp_path / "otel" / TRACES))
    calls = trace.of_kind("llm")
    assert [(c.start_ns, c.end_ns) for c in calls] == [
        (ANCHOR_WALL_NS + r.send_ns, ANCHOR_WALL_NS + r.end_ns) for r in records
    ]
    assert [(c.model, c.input_tokens, c.output_tokens) for c in calls] == [
        ("tiny-model", r.prompt_tokens, r.output_tokens) for r in records
    ]
    (root,) = trace.roots
    assert all(c.parent_id == root for c in calls) and trace.spans[root].name == "loadproof throughput"

    raw = spans_of([json.loads(line) for line in (tmp_path / "otel" / TRACES).read_text().splitlines()])
    by_id = {attributes(s)["loadproof.request_id"]: s for s in raw if "loadproof.request_id" in attributes(s)}
    for record in records:
        span = by_id[record.request_id]
        attrs = attributes(span)
        assert span["name"] == "chat tiny-model" and span["kind"] == 3  # CLIENT
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "_OTHER"
        assert attrs["server.address"] == "<ip>" and int(attrs["server.port"]) == 8123
        if succeeded(record):
            assert attrs["gen_ai.response.time_to_first_chunk"] == ttft_ns(record) / 1e9
            assert attrs["gen_ai.response.finish_reasons"] == {"values": [{"stringValue": "length"}]}
            assert "error.type" not in attrs and span["status"] == {}
        else:
            assert attrs["error.type"] == "http" and span["status"]["code"] == 2  # ERROR
            assert "gen_ai.response.time_to_first_chunk" not in attrs
    assert PRIVATE_HOST not in (tmp_path / "otel" / TRACES).read_text()


def test_the_runs_figures_are_genai_histograms_and_its_claims_a_gauge(tmp_path: Path):
    path = tracked_run(tmp_path / "runs")
    export(open_run(path), str(tmp_path / "otel"))
    records = load_run(path).records
    metrics = metrics_of([json.loads(line) for line in (tmp_path / "otel" / METRICS).read_text().splitlines()])
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration["unit"] == "s"
    points = duration["histogram"]["dataPoints"]
    assert sum(int(p["count"]) for p in points) == len(records)
    failed = [p for p in points if "error.type" in attributes(p)]
    assert [int(p["count"]) for p in failed] == [1]
    usage = {"input": 0.0, "output": 0.0}
    for point in metrics["gen_ai.client.token.usage"]["histogram"]["dataPoints"]:
        usage[attributes(point)["gen_ai.token.type"]] += float(point["sum"])
    assert usage["input"] == sum(r.prompt_tokens or 0 for r in records)
    assert usage["output"] == sum(r.output_tokens or 0 for r in records)
    first = metrics["gen_ai.client.operation.time_to_first_chunk"]["histogram"]["dataPoints"]
    assert sum(int(p["count"]) for p in first) == sum(1 for r in records if succeeded(r))
    gauge = {
        (attributes(p)["loadproof.claim.name"], attributes(p)["loadproof.claim.bound"]): p["asDouble"]
        for p in metrics["loadproof.claim"]["gauge"]["dataPoints"]
    }
    for claim in claims_of(path):
        assert gauge[(claim["name"], "value")] == claim["value"]
        if "interval" in claim:
            assert (gauge[(claim["name"], "low")], gauge[(claim["name"], "high")]) == (
                claim["interval"]["low"],
                claim["interval"]["high"],
            )


class Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.bodies.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_collector_url_gets_the_same_requests_over_otlp_http(tmp_path: Path, receiver: str):
    path = tracked_run(tmp_path / "runs")
    sent = export(open_run(path), receiver + "/")
    paths = [(p, kind) for p, kind, _ in Receiver.bodies]
    assert paths == [("/v1/traces", "application/json"), ("/v1/metrics", "application/json")]
    posted = tmp_path / "posted.jsonl"
    posted.write_bytes(Receiver.bodies[0][2] + b"\n")
    assert len(read_otel_trace(str(posted)).spans) == sent.spans


def test_a_target_is_checked_before_anything_is_read(tmp_path: Path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(UsageError, match="give a new or empty folder"):
        check_target(str(tmp_path / "full"))
    with pytest.raises(UsageError, match="a URL without a host"):
        check_target("http:///v1")
    check_target(str(tmp_path / "new"))


def test_a_receiver_that_does_not_answer_is_one_line(tmp_path: Path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(UsageError, match=rf"^--otlp {url}: no OTLP/HTTP receiver answers there"):
            export(open_run(tracked_run(tmp_path)), url)
