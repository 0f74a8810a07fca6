"""One client's connection to the relay: its requests one at a time, each read, admitted, sent upstream, and
answered (streamed or whole), with every timeout and heartbeat driven by the relay's one timer."""

from __future__ import annotations

import asyncio

from loadproof.protocol.openai import error_body
from loadproof.protocol.sse import HEARTBEAT, encode_data
from loadproof.relay.http import (
    MAX_HEAD_BYTES,
    BadMessage,
    ChunkedDecoder,
    RequestHead,
    internal_error,
    parse_request_head,
    response_head,
)
from loadproof.relay.prefill import GENERATION_PATHS, PrefillOutcome
from loadproof.relay.state import ENGINE_METRICS, ROUTES, RelayState
from loadproof.relay.stream import StreamWatch
from loadproof.relay.upstream import UpstreamConnection

_HEARTBEAT_CHUNK = b"%x\r\n%b\r\n" % (len(HEARTBEAT), HEARTBEAT)
_LAST_CHUNK = b"0\r\n\r\n"
_STREAM_HEADERS = b"cache-control: no-cache\r\nx-accel-buffering: no\r\n"
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_LINGER_S = 2.0  # after an answer sent before the body was read: how long the rest may still arrive
_INF = float("inf")

_HEAD, _BODY, _WAIT, _STREAM, _BUFFER, _LINGER, _CLOSED = range(7)


class ClientConnection(asyncio.Protocol):
    """One client's connection: its requests one at a time, each through the states
    _HEAD (request line and headers) -> _BODY (upload, slot held) -> _WAIT (upstream asked) ->
    _STREAM (events relayed) or _BUFFER (a non-streamed answer collected) -> back to _HEAD, or _LINGER
    (answered before the body was read: the connection closes)."""

    def __init__(self, relay: RelayState) -> None:
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
        self.stream = StreamWatch()
        self.last_write = 0.0
        self.resp_status = 0
        self.resp_type = ""
        self.resp_parts: list[bytes] = []
        self.extra_headers = b""  # the prefill hop's figures, for the client (relay.prefill)

    # -- the connection ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.relay.connections.add(self)
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
        except Exception as exc:
            internal_error(exc)
            self.abort()

    def eof_received(self) -> bool:
        return False  # a client that half-closes has left: close, and abort what it asked for

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay.connections.discard(self)
        state = self.state
        self.state = _CLOSED
        if state == _STREAM and self.stream.error_event:  # the client stopped at the engine's error: the outcome
            self.relay.metrics.upstream_errors += 1
            self._log(200, "upstream_error_event")
            self._release()
        elif state == _STREAM and self.stream.done_sent:
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

    def idle(self) -> bool:
        """Between requests with nothing of the next one read: closing loses nothing."""
        return self.state == _HEAD and not self.buf

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
            self._answer(
                503, error_body("the relay stopped before the answer", "service_unavailable", 503), "relay_stopped"
            )
        self.close()

    def tick(self, now: float) -> None:
        """Every timeout and heartbeat, from the relay's one timer."""
        state = self.state
        if state == _STREAM:
            if now >= self.deadline_at:
                self.relay.metrics.upstream_errors += 1
                self._stream_error("the relay's deadline passed before the stream ended", "deadline")
            elif now - self.last_write >= self.relay.config.heartbeat_s:
                if self.stream.at_boundary and not self.paused:  # a blank line mid-event would end the event
                    assert self.transport is not None
                    self.transport.write(_HEARTBEAT_CHUNK if self.chunked_out else HEARTBEAT)
                    if self.stream.got_body:
                        self.relay.metrics.heartbeats_between += 1
                    else:
                        self.relay.metrics.heartbeats_waiting += 1
                self.last_write = now
        elif state == _WAIT or state == _BUFFER:
            if now >= self.deadline_at:
                self.relay.metrics.upstream_errors += 1
                message = (
                    "upstream sent no response headers within the deadline"
                    if state == _WAIT
                    else "upstream did not answer within the deadline"
                )
                self._answer(504, error_body(message, "upstream_error", 504), "deadline")
        elif state == _BODY:
            if now >= self.timer_at:
                seconds = min(self.relay.config.body_timeout_s, self.relay.config.deadline_s)
                self._answer(
                    408,
                    error_body(f"the request body did not arrive within {seconds:g} s", "invalid_request_error", 408),
                    "body_timeout",
                )
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
        self.buf = buf[end + 4 :]
        self._begin(req)

    def _begin(self, req: RequestHead) -> None:
        relay = self.relay
        config = relay.config
        now = self.loop.time()  # type: ignore[union-attr]
        self.req = req
        self.started = now
        self.body_read = not (req.chunked or req.content_length)
        refusal = relay.refusal(req)
        # a scrape takes no slot: a run that fills the pool still sees the engine
        if refusal is None and req.path != ENGINE_METRICS:
            refusal = relay.busy()
            if refusal is None:
                self.slot = True
                relay.metrics.in_flight += 1
        if refusal is not None:
            self._answer(*refusal)
            return
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
        if self.relay.prefill is not None and req.method == "POST" and req.path in GENERATION_PATHS:
            self.connecting = asyncio.ensure_future(self._prefill_first(body))
            return
        self._send_upstream(body)

    async def _prefill_first(self, body: bytes) -> None:
        """A disaggregated pair: the prompt prefilled on the prefill instance, then the request to the decode one."""
        assert self.relay.prefill is not None and self.req is not None
        try:
            outcome = await self.relay.prefill.run(self.req.path, body, self.loop)  # type: ignore[arg-type]
        except Exception as exc:
            internal_error(exc)
            outcome = PrefillOutcome(
                answer=(502, error_body("relay error in the prefill hop", "upstream_error", 502), "prefill_error")
            )
        self.connecting = None
        if self.state != _WAIT:
            return
        if outcome.answer is not None:
            self._answer(*outcome.answer)
            return
        self.extra_headers = outcome.headers
        self._send_upstream(outcome.body)

    def _send_upstream(self, body: bytes) -> None:
        req = self.req
        assert req is not None
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
        except (TimeoutError, OSError) as exc:
            self.connecting = None
            if self.state == _WAIT:
                self.relay.metrics.upstream_errors += 1
                self._answer(
                    502,
                    error_body(f"upstream unreachable ({type(exc).__name__})", "upstream_error", 502),
                    "upstream_unreachable",
                )
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
            self.transport.write(
                response_head(
                    200,
                    content_type,
                    chunked=req.http11,
                    close=not (req.http11 and req.keep_alive),
                    extra=_STREAM_HEADERS + self.extra_headers,
                )
            )
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
        self.stream.feed(data)
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
            if not self.stream.at_boundary:
                self.relay.metrics.upstream_errors += 1
                self._stream_error("upstream closed the stream mid-event", "upstream_error")
            elif self.stream.error_event:
                self.relay.metrics.upstream_errors += 1
                self._end_stream("upstream_error_event")
            else:
                self._end_stream("ok")
        elif self.state == _BUFFER:
            body = b"".join(self.resp_parts)
            self._answer(self.resp_status, body, "ok" if self.resp_status == 200 else "upstream_status", self.resp_type)

    def upstream_lost(self, why: str) -> None:
        self.upstream = None
        self.relay.metrics.upstream_errors += 1
        if self.state == _STREAM:
            self._stream_error(f"upstream failed mid-stream ({why})", "upstream_error")
        elif self.state == _WAIT:
            self._answer(
                502,
                error_body(f"upstream closed the connection before answering ({why})", "upstream_error", 502),
                "upstream_unreachable",
            )
        elif self.state == _BUFFER:
            self._answer(
                502,
                error_body(f"upstream failed before its answer was complete ({why})", "upstream_error", 502),
                "upstream_error",
            )

    # -- ending a request -------------------------------------------------------------------------

    def _stream_error(self, message: str, outcome: str) -> None:
        prefix = b"" if self.stream.at_boundary else b"\n\n"  # end a half-sent event first, so the error stands alone
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

    def _answer(self, status: int, body: bytes, outcome: str | None, content_type: str = "application/json") -> None:
        """A whole answer with its length; `outcome` None: not a relayed request, not logged."""
        req = self.req
        assert req is not None and self.transport is not None
        close = not req.keep_alive or not self._skip_body()
        self.transport.write(
            response_head(status, content_type, length=len(body), close=close, extra=self.extra_headers) + body
        )
        if outcome is not None:
            self._log(status, outcome)
        self._finish(close)

    def _too_large(self) -> None:
        self._answer(*self.relay.too_large())

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
        self.relay.access_log(req.method, path, status, outcome, self.head_sent, self.loop.time() - self.started)  # type: ignore[union-attr]
