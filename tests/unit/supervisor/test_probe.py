"""The liveness probe against a real local HTTP server: each way an engine can answer is its own outcome,
the API key is sent, and a stop ends a probe in flight."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from loadproof.engines import engines
from loadproof.engines.process import free_port
from loadproof.supervisor import ProbeOutcome, engine_work, probe
from loadproof.supervisor.probe import engine_work_of, probe_engine

KEY = "sk-probe-test-7731"
METRICS = {
    "vllm": "vllm:prompt_tokens_total 120\nvllm:generation_tokens_total 30\nvllm:kv_cache_usage_perc 0.25\n",
    "sglang": "sglang:prompt_tokens_total 7\nsglang:generation_tokens_total 3\nsglang:token_usage 0.5\n",
}


class Handler(BaseHTTPRequestHandler):
    mode = "ok"
    metrics = "vllm"
    seen_auth: list[str | None] = []
    seen_paths: list[str] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = METRICS[self.metrics].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        auth = self.headers.get("Authorization")
        Handler.seen_auth.append(auth)
        Handler.seen_paths.append(self.path)
        mode = Handler.mode
        if mode == "slow":
            time.sleep(1.5)  # sleep: a slow engine, the behaviour under test
            mode = "ok"
        if mode == "key" and auth != f"Bearer {KEY}":
            return self._send(401, {"error": "Unauthorized"})
        if mode == "500":
            return self._send(500, {"error": "boom"})
        if mode == "garbage":
            return self._send(200, None, raw=b"<html>not json</html>")
        if mode == "no_choices":
            return self._send(200, {"choices": []})
        if self.path == "/v1/embeddings":  # a pooling model: vectors, and no completions route
            return self._send(200, {"data": [{"index": 0, "embedding": [0.6, 0.8]}]})
        self._send(200, {"choices": [{"text": "!"}]})

    def _send(self, status: int, payload: object, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def engine_url() -> Iterator[str]:
    Handler.mode, Handler.metrics, Handler.seen_auth, Handler.seen_paths = "ok", "vllm", [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "mode, outcome",
    [
        ("ok", ProbeOutcome.OK),
        ("500", ProbeOutcome.HTTP_ERROR),
        ("garbage", ProbeOutcome.BAD_ANSWER),
        ("no_choices", ProbeOutcome.BAD_ANSWER),
        ("slow", ProbeOutcome.TIMEOUT),
    ],
)
def test_each_answer_has_its_outcome(engine_url, mode, outcome):
    Handler.mode = mode
    result = probe(engine_url, "m", timeout_s=0.3)
    assert result.outcome is outcome
    assert result.ok == (outcome is ProbeOutcome.OK)


def test_nothing_listening_is_refused():
    result = probe(f"http://127.0.0.1:{free_port()}", "m", timeout_s=2)
    assert result.outcome is ProbeOutcome.REFUSED


def test_the_api_key_is_sent_and_never_part_of_the_result(engine_url):
    Handler.mode = "key"
    without = probe(engine_url, "m", timeout_s=2)
    assert without.outcome is ProbeOutcome.HTTP_ERROR and without.status == 401
    with_key = probe(engine_url, "m", timeout_s=2, api_key=KEY)
    assert with_key.ok
    assert Handler.seen_auth == [None, f"Bearer {KEY}"]
    assert KEY not in str(without) + str(with_key) + repr(with_key)


def test_engine_work_reads_the_engines_own_metric_names(engine_url):
    assert engine_work(engine_url, engines.get("vllm").metric_names) == (120.0, 30.0, 0.25)
    Handler.metrics = "sglang"
    assert engine_work(engine_url, engines.get("vllm").metric_names) is None  # vLLM's names are not there
    assert engine_work(engine_url, engines.get("sglang").metric_names) == (7.0, 3.0, 0.5)
    fake_process = SimpleNamespace(url=engine_url, api_key=None, engine=engines.get("sglang"))
    assert engine_work_of(fake_process) == (7.0, 3.0, 0.5)  # type: ignore[arg-type]  # a stand-in engine process


def test_a_stop_ends_a_probe_in_flight(engine_url):
    Handler.mode = "slow"  # answers after 1.5 s; the probe would wait 30
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    began = time.monotonic()
    result = probe_engine(SimpleNamespace(url=engine_url, api_key=None), "m", 30.0, cancel)  # type: ignore[arg-type]  # url and key are all it reads
    assert result.outcome is ProbeOutcome.CANCELLED
    assert time.monotonic() - began < 0.8


def test_a_pooling_model_is_probed_by_embedding_one_input(engine_url):
    assert probe(engine_url, "m", timeout_s=2, embeddings=True).ok
    assert probe(engine_url, "m", timeout_s=2).ok
    assert Handler.seen_paths == ["/v1/embeddings", "/v1/completions"]
    Handler.mode = "no_choices"  # an answer with no vector fails an embeddings probe
    bad = probe(engine_url, "m", timeout_s=2, embeddings=True)
    assert bad.outcome is ProbeOutcome.BAD_ANSWER and bad.detail == "an answer without data"
