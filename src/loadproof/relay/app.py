"""The relay: an OpenAI-compatible streaming reverse proxy built for million-token prompts.

It forwards `/v1/chat/completions`, `/v1/completions`, `/v1/models`, the engine's `/tokenize`,
`/detokenize` and `/version`, and serves the engine's own `/metrics` as `/engine/metrics` (never on its own
`/metrics`, which holds only the relay's figures); `/health` and `/metrics` are its own.

What it guarantees, and why (the relays people put in front of engines get each of these wrong):
- the upstream comes from config only, never from a request;
- bounded concurrency: a request beyond the pool gets an immediate 429, never a hang. The slot is taken
  before the body is read, so N slow uploads hold N slots, and it is released on every path (success,
  upstream error, deadline, body timeout, client disconnect, streamed or not);
- a total deadline per request, independent of any idle timeout (default: an hour), and a bound on the
  time the body may take to arrive (`body_timeout_s`, never past the deadline): 408 after it;
- streams get their response headers as soon as the engine's arrive, then a heartbeat whenever the engine
  has been silent for `heartbeat_s`, only between events (vLLM sends nothing during queueing and
  prefill, and 60 s idle timeouts cut long prompts). The heartbeat is a blank line
  (protocol.sse.HEARTBEAT), measured invisible to the clients people use; a `:` comment broke
  `vllm bench serve` on every request;
- an upstream failure after the stream started becomes an in-band error event and a clean end of the
  stream; before the first byte it becomes a proper HTTP error (502, or 504 for the deadline). An
  engine's own in-band error event passes through untouched and is logged `upstream_error_event`;
- when the client leaves (streaming, waiting for a non-streamed answer, or still uploading), the upstream
  connection is closed at once, so the engine aborts the request and frees its KV cache;
- API keys compared in constant time, on the API, on /metrics and on /engine/metrics; a request body size
  limit; logs that hold no key, no prompt and no upstream address.

It speaks HTTP/1.1 itself on asyncio protocols (relay.http, relay.upstream), one timer for all timeouts
and heartbeats: Starlette on uvicorn with aiohttp to the upstream reached 0.46-0.73x nginx's throughput
with +25 to +45 ms p99 per chunk at 64 streams, the time going to the framework's per-request and
per-chunk layers (docs/relay-and-supervisor.md has the profile).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from loadproof.protocol.openai import error_body
from loadproof.protocol.sse import HEARTBEAT, encode_data
from loadproof.relay.http import (
    MAX_HEAD_BYTES, BadMessage, ChunkedDecoder, RequestHead, internal_error, parse_request_head, response_head,
)
from loadproof.relay.upstream import UpstreamConnection, UpstreamPool

log = logging.getLogger("loadproof.relay")

ROUTES = {"/v1/chat/completions": "POST", "/v1/completions": "POST", "/v1/models": "GET",
          "/tokenize": "POST", "/detokenize": "POST", "/version": "GET", "/engine/metrics": "GET",
          "/health": "GET", "/metrics": "GET"}
_OWN = ("/health", "/metrics")
# the engine's own /metrics, under a path of its own: the relay's /metrics never holds an engine figure, and a
# scraper that reads the engine through the relay cannot take the relay's counters for the engine's
ENGINE_METRICS = "/engine/metrics"
_UPSTREAM_PATHS = {ENGINE_METRICS: "/metrics"}
# an in-band error event as vLLM (`{"error": {...}}`), SGLang and older vLLM (`"object": "error"`) send it
_ERROR_MARKERS = (b'data: {"error"', b'data:{"error"', b'"object": "error"', b'"object":"error"')
_HEARTBEAT_CHUNK = b"%x\r\n%b\r\n" % (len(HEARTBEAT), HEARTBEAT)
_LAST_CHUNK = b"0\r\n\r\n"
_STREAM_HEADERS = b"cache-control: no-cache\r\nx-accel-buffering: no\r\n"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LINGER_S = 2.0  # after an answer sent before the body was read: how long the rest may still arrive
_INF = float("inf")


@dataclass(frozen=True)
class RelayConfig:
    upstream: str
    max_in_flight: int = 64
    deadline_s: float = 3600.0
    heartbeat_s: float = 5.0
    body_timeout_s: float = 60.0  # the request line, headers and body must arrive within this
    max_body_bytes: int = 64 * 1024 * 1024  # a 1M-token prompt is about 4-7 MB of JSON
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    upstream_keepalive_s: float = 4.0  # shorter than uvicorn's 5 s default keep-alive on the engine side
    upstream_api_key: str | None = field(default=None, repr=False)
    idle_timeout_s: float = 75.0  # a kept-alive client connection with no request in progress


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
        for name, text, value in (("rejected", "requests refused: pool full", m.rejected),
                                  ("upstream_errors", "upstream failures", m.upstream_errors),
                                  ("client_disconnects", "clients that left mid-request", m.disconnects)):
            yield CounterMetricFamily(f"loadproof_relay_{name}", text, value=value)


class Relay:
    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.metrics = RelayMetrics()
        self.paused_reason: str | None = None  # set by a supervisor while the engine restarts
        self.pool = UpstreamPool(config.upstream, config.upstream_keepalive_s)
        self._keys = tuple(key.encode() for key in config.api_keys)
        auth = f"authorization: Bearer {config.upstream_api_key}\r\n" if config.upstream_api_key else ""
        self._upstream_fields = f"host: {self.pool.host_header}\r\n{auth}accept: */*\r\n".encode("latin-1")
        self._heads: dict[tuple[str, str], bytes] = {}
        self._connections: set[ClientConnection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._tick_s = max(0.01, min(0.1, config.heartbeat_s / 4))
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def in_flight(self) -> int:
        return self.metrics.in_flight

    async def start(self, host: str, port: int) -> None:
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(lambda: ClientConnection(self), host, port, backlog=4096)
        self._ticker = self.loop.call_later(self._tick_s, self._tick)

    async def stop(self, drain_s: float | None = None) -> None:
        """Stop accepting; let requests in flight end (for `drain_s` at most, None: however long); then
        close every connection (upstreams too, so the engine aborts what is left)."""
        assert self.loop is not None
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            if conn.state == _HEAD and not conn.buf:
                conn.close()
        until = self.loop.time() + drain_s if drain_s is not None else _INF
        while self.metrics.in_flight and self.loop.time() < until:
            await asyncio.sleep(0.05)
        for conn in list(self._connections):
            conn.shut_down()  # what is still in flight ends with an explicit error, not a silent cut
        self.pool.close_all()
        if self._ticker is not None:
            self._ticker.cancel()
        await asyncio.sleep(0)  # let the closed transports report
        for handler in log.handlers:
            handler.flush()

    def _tick(self) -> None:
        assert self.loop is not None
        now = self.loop.time()
        for conn in list(self._connections):
            try:
                conn.tick(now)
            except Exception as exc:  # noqa: BLE001  (one connection's bug must not stop every timer)
                internal_error(exc)
                conn.abort()
        for handler in log.handlers:  # access lines are written in batches (relay.serve.BatchedLineHandler)
            handler.flush()
        self._ticker = self.loop.call_later(self._tick_s, self._tick)

    def authorized(self, headers: dict[str, str]) -> bool:
        if not self._keys:
            return True
        header = headers.get("authorization", "")
        token = header[7:].encode("latin-1") if header[:7].lower() == "bearer " else b""
        ok = False
        for key in self._keys:  # compare with every key, always: no early exit to time
            ok |= hmac.compare_digest(token, key)
        return ok

    def upstream_head(self, method: str, path: str, length: int | None) -> bytes:
        start = self._heads.get((method, path))
        if start is None:
            upstream_path = _UPSTREAM_PATHS.get(path, path)
            start = f"{method} {self.pool.prefix}{upstream_path} HTTP/1.1\r\n".encode("latin-1") + self._upstream_fields
            self._heads[(method, path)] = start
        if length is None:
            return start + b"\r\n"
        return start + b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % length

    def access_log(self, method: str, path: str, status: int, outcome: str, stream: bool, seconds: float) -> None:
        requests = self.metrics.requests
        requests[outcome] = requests.get(outcome, 0) + 1
        if log.isEnabledFor(logging.INFO):
            log.info(json.dumps({"method": method, "path": path, "status": status, "outcome": outcome,
                                 "stream": stream, "duration_s": round(seconds, 3)}))

    def health(self) -> tuple[int, bytes]:
        if self.paused_reason:
            return 503, json.dumps({"status": "unavailable", "reason": self.paused_reason}).encode()
        return 200, json.dumps({"status": "ok", "in_flight": self.metrics.in_flight}).encode()


_HEAD, _BODY, _WAIT, _STREAM, _BUFFER, _LINGER, _CLOSED = range(7)


class ClientConnection(asyncio.Protocol):
    """One client's connection: its requests one at a time, each through the states
    _HEAD (request line and headers) -> _BODY (upload, slot held) -> _WAIT (upstream asked) ->
    _STREAM (events relayed) or _BUFFER (a non-streamed answer collected) -> back to _HEAD, or _LINGER
    (answered before the body was read: the connection closes)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.loop = relay.loop
        self.transport: asyncio.Transport | None = None
        self.state = _HEAD
        self.buf = b""
        self.timer_at = 0.0  # when the state's own timeout strikes (idle, head, body, linger)
        self.paused = False
        self._reset()

    def _reset(self) -> None:
        self.req: RequestHead | None = None
        self.started = 0.0
        self.deadline_at = _INF
        self.slot = False
        self.upstream: UpstreamConnection | None = None
        self.connecting: asyncio.Future[None] | None = None
        self.body_parts: list[bytes] = []
        self.body_size = 0
        self.body_chunks: ChunkedDecoder | None = None
        self.body_read = True
        self.head_sent = False
        self.chunked_out = True
        self.at_boundary = True
        self.got_body = False
        self.last_write = 0.0
        self.error_event = False
        self.done_sent = False  # the stream's last event, `data: [DONE]`, has gone to the client
        self.err_tail = b""
        self.resp_status = 0
        self.resp_type = ""
        self.resp_parts: list[bytes] = []

    # -- the connection ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.relay._connections.add(self)
        self.timer_at = self.loop.time() + self.relay.config.idle_timeout_s  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        try:
            state = self.state
            if state == _HEAD:
                self._head_data(data)
            elif state == _BODY:
                self._body_data(data)
            elif state == _LINGER or state == _CLOSED:
                pass
            else:  # a pipelined request: kept until this answer is sent
                self.buf += data
                if len(self.buf) > MAX_HEAD_BYTES and self.transport is not None:
                    self.transport.pause_reading()
        except Exception as exc:  # noqa: BLE001  (never leak a slot or an upstream on a bug)
            internal_error(exc)
            self.abort()

    def eof_received(self) -> bool:
        return False  # a client that half-closes has left: close, and abort what it asked for

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay._connections.discard(self)
        state = self.state
        self.state = _CLOSED
        if state == _STREAM and self.error_event:  # the client stopped at the engine's error: that is the outcome
            self.relay.metrics.upstream_errors += 1
            self._log(200, "upstream_error_event")
            self._release()
        elif state == _STREAM and self.done_sent:
            # the client read the whole stream and left before the upstream's end of body reached us
            # (clients stop at [DONE]): the request is complete, not abandoned
            self._log(200, "ok")
            self._release()
        elif state in (_BODY, _WAIT, _STREAM, _BUFFER):
            self.relay.metrics.disconnects += 1
            self._log(200 if self.head_sent else 499, "client_disconnect")
            self._release()

    def pause_writing(self) -> None:
        self.paused = True
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        self.paused = False
        if self.upstream is not None:
            self.upstream.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection now; connection_lost releases what the request held."""
        if self.transport is not None:
            self.transport.abort()

    def shut_down(self) -> None:
        """The relay stops: a request in flight ends with an error the client can read (503, or an in-band
        error event in a stream), its upstream is closed, and so is the connection."""
        state = self.state
        if state == _STREAM:
            self._stream_error("the relay stopped before the stream ended", "relay_stopped")
        elif state in (_BODY, _WAIT, _BUFFER):
            self._answer(503, error_body("the relay stopped before the answer", "service_unavailable", 503),
                         "relay_stopped")
        self.close()

    def tick(self, now: float) -> None:
        """Every timeout and heartbeat, from the relay's one timer."""
        state = self.state
        if state == _STREAM:
            if now >= self.deadline_at:
                self.relay.metrics.upstream_errors += 1
                self._stream_error("the relay's deadline passed before the stream ended", "deadline")
            elif now - self.last_write >= self.relay.config.heartbeat_s:
                if self.at_boundary and not self.paused:  # a blank line mid-event would end the event
                    assert self.transport is not None
                    self.transport.write(_HEARTBEAT_CHUNK if self.chunked_out else HEARTBEAT)
                    if self.got_body:
                        self.relay.metrics.heartbeats_between += 1
                    else:
                        self.relay.metrics.heartbeats_waiting += 1
                self.last_write = now
        elif state == _WAIT or state == _BUFFER:
            if now >= self.deadline_at:
                self.relay.metrics.upstream_errors += 1
                message = ("upstream sent no response headers within the deadline" if state == _WAIT
                           else "upstream did not answer within the deadline")
                self._answer(504, error_body(message, "upstream_error", 504), "deadline")
        elif state == _BODY:
            if now >= self.timer_at:
                seconds = min(self.relay.config.body_timeout_s, self.relay.config.deadline_s)
                self._answer(408, error_body(f"the request body did not arrive within {seconds:g} s",
                                             "invalid_request_error", 408), "body_timeout")
        elif state == _HEAD:
            if now >= self.timer_at:
                if self.buf:  # a request head begun and not finished in time
                    self._reject(408, "the request head did not arrive in time")
                else:
                    self.close()  # idle
        elif state == _LINGER and now >= self.timer_at:
            self.close()

    # -- the request ------------------------------------------------------------------------------

    def _head_data(self, data: bytes) -> None:
        if not self.buf:
            if data[:2] == b"\r\n":  # stray line ends between requests are ignored (RFC 9112 2.2)
                data = data.lstrip(b"\r\n")
            if not data:
                return
            self.timer_at = self.loop.time() + self.relay.config.body_timeout_s  # type: ignore[union-attr]
        buf = self.buf + data if self.buf else data
        end = buf.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES + 4)
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                self._reject(431, "request head too large")
            else:
                self.buf = buf
            return
        try:
            req = parse_request_head(buf[:end])
        except BadMessage as exc:
            self._reject(exc.status, exc.message)
            return
        self.buf = buf[end + 4:]
        self._begin(req)

    def _begin(self, req: RequestHead) -> None:
        relay = self.relay
        config = relay.config
        now = self.loop.time()  # type: ignore[union-attr]
        self.req = req
        self.started = now
        self.body_read = not (req.chunked or req.content_length)
        method = ROUTES.get(req.path)
        if method is None:
            self._answer(404, error_body("not found", "invalid_request_error", 404), "not_found")
            return
        if req.method != method:
            self._answer(405, error_body(f"{req.method} not allowed here", "invalid_request_error", 405),
                         "method_not_allowed")
            return
        if req.path in _OWN:
            if req.path == "/health":
                status, body = relay.health()
                self._answer(status, body, None)
            elif relay.authorized(req.headers):
                self._answer(200, generate_latest(relay.metrics.registry), None,
                             "text/plain; version=0.0.4; charset=utf-8")
            else:
                self._answer(401, error_body("missing or invalid API key", "authentication_error", 401), None)
            return
        if not relay.authorized(req.headers):
            self._answer(401, error_body("missing or invalid API key", "authentication_error", 401), "unauthorized")
            return
        if relay.paused_reason:
            self._answer(503, error_body(f"engine unavailable: {relay.paused_reason}", "service_unavailable", 503),
                         "engine_unavailable")
            return
        if req.content_length is not None and req.content_length > config.max_body_bytes:
            self._too_large()
            return
        if req.path != ENGINE_METRICS:  # a scrape takes no slot: a run that fills the pool still sees the engine
            if relay.metrics.in_flight >= config.max_in_flight:
                relay.metrics.rejected += 1
                self._answer(429, error_body(f"relay busy: all {config.max_in_flight} slots in use; retry later",
                                             "rate_limit_error", 429), "rejected")
                return
            self.slot = True
            relay.metrics.in_flight += 1
        self.deadline_at = now + config.deadline_s
        if self.body_read:
            self._to_upstream(b"")
            return
        self.state = _BODY
        self.timer_at = min(now + config.body_timeout_s, self.deadline_at)
        self.body_chunks = ChunkedDecoder() if req.chunked else None
        if req.expect_continue and not self.buf:
            assert self.transport is not None
            self.transport.write(_CONTINUE)
        if self.buf:
            data, self.buf = self.buf, b""
            self._body_data(data)

    def _body_data(self, data: bytes) -> None:
        req = self.req
        assert req is not None
        if self.body_chunks is None:
            need = (req.content_length or 0) - self.body_size
            if len(data) < need:
                self.body_parts.append(data)
                self.body_size += len(data)
                return
            self.body_parts.append(data[:need] if len(data) > need else data)
            self.body_size += need
            self.buf = data[need:]
        else:
            try:
                pieces = self.body_chunks.feed(data)
            except BadMessage as exc:
                self._answer(exc.status, error_body(exc.message, "invalid_request_error", exc.status), "bad_request")
                return
            for piece in pieces:
                self.body_size += len(piece)
            if self.body_size > self.relay.config.max_body_bytes:
                self._too_large()
                return
            self.body_parts += pieces
            if not self.body_chunks.done:
                return
            self.buf = self.body_chunks.rest
        self.body_read = True
        body = b"".join(self.body_parts) if len(self.body_parts) != 1 else self.body_parts[0]
        self.body_parts = []
        self._to_upstream(body)

    def _to_upstream(self, body: bytes) -> None:
        req = self.req
        assert req is not None
        self.state = _WAIT
        head = self.relay.upstream_head(req.method, req.path, len(body) if body or req.method == "POST" else None)
        conn = self.relay.pool.take(self.loop.time())  # type: ignore[union-attr]
        if conn is not None:
            self.upstream = conn
            conn.send(head, body, self)
        else:
            self.connecting = asyncio.ensure_future(self._connect(head, body))

    async def _connect(self, head: bytes, body: bytes) -> None:
        try:
            conn = await self.relay.pool.connect()
        except (OSError, asyncio.TimeoutError) as exc:
            self.connecting = None
            if self.state == _WAIT:
                self.relay.metrics.upstream_errors += 1
                self._answer(502, error_body(f"upstream unreachable ({type(exc).__name__})", "upstream_error", 502),
                             "upstream_unreachable")
            return
        self.connecting = None
        if self.state != _WAIT or self.upstream is not None:  # the request ended while connecting
            self.relay.pool.put(conn, self.loop.time())  # type: ignore[union-attr]
            return
        self.upstream = conn
        conn.send(head, body, self)

    # -- the upstream's answer (called by UpstreamConnection) ---------------------------------------

    def upstream_head(self, status: int, headers: dict[str, str]) -> None:
        content_type = headers.get("content-type", "")
        if status == 200 and content_type.startswith("text/event-stream"):
            req = self.req
            assert req is not None and self.transport is not None
            self.state = _STREAM
            self.chunked_out = req.http11
            self.transport.write(response_head(200, content_type, chunked=req.http11,
                                               close=not (req.http11 and req.keep_alive), extra=_STREAM_HEADERS))
            self.head_sent = True
            self.last_write = self.loop.time()  # type: ignore[union-attr]
            if self.paused and self.upstream is not None:
                self.upstream.pause_reading()
        else:
            self.state = _BUFFER
            self.resp_status = status
            self.resp_type = content_type or "application/json"

    def upstream_body(self, data: bytes) -> None:
        if self.state != _STREAM:
            self.resp_parts.append(data)
            return
        if self.err_tail and any(m in self.err_tail + data[:24] for m in _ERROR_MARKERS):
            self.error_event = True
        if b'"error"' in data and any(m in data for m in _ERROR_MARKERS):
            self.error_event = True
        self.got_body = True
        end = data[-4:]
        self.at_boundary = boundary = end[-2:] == b"\n\n" or end == b"\r\n\r\n" or end[-2:] == b"\r\r"
        self.done_sent = boundary and (self.err_tail + data[-24:]).rstrip(b"\r\n").endswith(b"data: [DONE]")
        self.err_tail = b"" if boundary else data[-24:]
        assert self.transport is not None
        if self.chunked_out:
            self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        else:
            self.transport.write(data)
        self.last_write = self.loop.time()  # type: ignore[union-attr]

    def upstream_end(self, conn: UpstreamConnection) -> None:
        self.upstream = None
        self.relay.pool.put(conn, self.loop.time())  # type: ignore[union-attr]
        if self.state == _STREAM:
            if not self.at_boundary:
                self.relay.metrics.upstream_errors += 1
                self._stream_error("upstream closed the stream mid-event", "upstream_error")
            elif self.error_event:
                self.relay.metrics.upstream_errors += 1
                self._end_stream("upstream_error_event")
            else:
                self._end_stream("ok")
        elif self.state == _BUFFER:
            body = b"".join(self.resp_parts)
            self._answer(self.resp_status, body, "ok" if self.resp_status == 200 else "upstream_status",
                         self.resp_type)

    def upstream_lost(self, why: str) -> None:
        self.upstream = None
        self.relay.metrics.upstream_errors += 1
        if self.state == _STREAM:
            self._stream_error(f"upstream failed mid-stream ({why})", "upstream_error")
        elif self.state == _WAIT:
            self._answer(502, error_body(f"upstream closed the connection before answering ({why})",
                                         "upstream_error", 502), "upstream_unreachable")
        elif self.state == _BUFFER:
            self._answer(502, error_body(f"upstream failed before its answer was complete ({why})",
                                         "upstream_error", 502), "upstream_error")

    # -- ending a request -------------------------------------------------------------------------

    def _stream_error(self, message: str, outcome: str) -> None:
        prefix = b"" if self.at_boundary else b"\n\n"  # end a half-sent event first, so the error stands alone
        event = prefix + encode_data(error_body(message, "upstream_error", 502))
        assert self.transport is not None
        self.transport.write(b"%x\r\n%b\r\n" % (len(event), event) if self.chunked_out else event)
        self._end_stream(outcome)

    def _end_stream(self, outcome: str) -> None:
        assert self.transport is not None and self.req is not None
        if self.chunked_out:
            self.transport.write(_LAST_CHUNK)
        self._log(200, outcome)
        self._finish(close=not (self.chunked_out and self.req.keep_alive))

    def _answer(self, status: int, body: bytes, outcome: str | None,
                content_type: str = "application/json") -> None:
        """A whole answer with its length; `outcome` None: not a relayed request, not logged."""
        req = self.req
        assert req is not None and self.transport is not None
        close = not req.keep_alive or not self._skip_body()
        self.transport.write(response_head(status, content_type, length=len(body), close=close) + body)
        if outcome is not None:
            self._log(status, outcome)
        self._finish(close)

    def _too_large(self) -> None:
        limit = self.relay.config.max_body_bytes
        self._answer(413, error_body(f"request body over {limit} bytes", "invalid_request_error", 413), "too_large")

    def _reject(self, status: int, message: str) -> None:
        """A request that could not be parsed: answer and close."""
        assert self.transport is not None
        body = error_body(message, "invalid_request_error", status)
        self.transport.write(response_head(status, "application/json", length=len(body), close=True) + body)
        self.buf = b""
        self._linger()

    def _skip_body(self) -> bool:
        """Whether the connection can carry another request: the body was read, or is all here already."""
        if self.body_read:
            return True
        req = self.req
        assert req is not None
        if self.state == _BODY or req.chunked:
            return False
        length = req.content_length or 0
        if len(self.buf) >= length:
            self.buf = self.buf[length:]
            self.body_read = True
            return True
        return False

    def _finish(self, close: bool) -> None:
        self._release()
        self._reset()
        if close or self.state == _CLOSED:
            self._linger()
            return
        self.state = _HEAD
        now = self.loop.time()  # type: ignore[union-attr]
        self.timer_at = now + self.relay.config.idle_timeout_s
        if self.buf:  # a pipelined request: read next, before anything that arrives after it
            self.timer_at = now + self.relay.config.body_timeout_s
            self.loop.call_soon(self._pipelined)  # type: ignore[union-attr]
        if self.transport is not None:
            self.transport.resume_reading()

    def _pipelined(self) -> None:
        if self.state == _HEAD and self.buf:
            self.data_received(b"")

    def _release(self) -> None:
        if self.upstream is not None:
            self.upstream.detach()
            self.upstream = None
        if self.connecting is not None:
            self.connecting.cancel()
            self.connecting = None
        if self.slot:
            self.slot = False
            self.relay.metrics.in_flight -= 1

    def _linger(self) -> None:
        """Close after the answer is sent; what the client still sends is read and dropped for a while
        (closing at once with unread bytes would reset the connection and lose the answer)."""
        if self.state == _CLOSED or self.transport is None:
            return
        self.state = _LINGER
        self.buf = b""
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.timer_at = self.loop.time() + _LINGER_S  # type: ignore[union-attr]
        else:
            self.transport.close()

    def _log(self, status: int, outcome: str) -> None:
        req = self.req
        assert req is not None
        path = req.path if req.path in ROUTES else "(other)"  # an arbitrary path could hold anything
        self.relay.access_log(req.method, path, status, outcome, self.head_sent,
                              self.loop.time() - self.started)  # type: ignore[union-attr]

