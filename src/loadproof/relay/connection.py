"""One client's connection to the relay: its requests one at a time, each read, admitted, sent upstream, and
answered (streamed or whole; `relay.exchange`), with every timeout and heartbeat driven by the relay's one timer."""

from __future__ import annotations

import asyncio
from typing import cast

from loadproof.protocol.openai import error_body
from loadproof.protocol.sse import HEARTBEAT
from loadproof.relay.exchange import BODY, BUFFER, CLOSED, HEAD, HEARTBEAT_CHUNK, LINGER, STREAM, WAIT, Exchange
from loadproof.relay.http import (
    MAX_HEAD_BYTES,
    BadMessage,
    ChunkedDecoder,
    RequestHead,
    internal_error,
    parse_request_head,
)
from loadproof.relay.prefill import GENERATION_PATHS, PrefillOutcome
from loadproof.relay.state import ENGINE_METRICS

_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class ClientConnection(Exchange, asyncio.Protocol):
    """One client's connection: its requests one at a time, each through the states
    HEAD (request line and headers) -> BODY (upload, slot held) -> WAIT (upstream asked) ->
    STREAM (events relayed) or BUFFER (a non-streamed answer collected) -> back to HEAD, or LINGER
    (answered before the body was read: the connection closes)."""

    # -- the connection ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a server's stream connection: an asyncio.Transport
        self.relay.connections.add(self)
        self.timer_at = self.loop.time() + self.relay.config.idle_timeout_s

    def data_received(self, data: bytes) -> None:
        try:
            state = self.state
            if state == HEAD:
                self._head_data(data)
            elif state == BODY:
                self._body_data(data)
            elif state == LINGER or state == CLOSED:
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
        self.state = CLOSED
        if state == STREAM and self.stream.error_event:  # the client stopped at the engine's error: the outcome
            self.relay.metrics.upstream_errors += 1
            self._log(200, "upstream_error_event")
            self._release()
        elif state == STREAM and self.stream.done_sent:
            # the client read the whole stream and left before the upstream's end of body reached us
            # (clients stop at [DONE], or at an API's last event): the request is complete, not abandoned
            self._log(200, "ok")
            self._release()
        elif state in (BODY, WAIT, STREAM, BUFFER):
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
        return self.state == HEAD and not self.buf

    def abort(self) -> None:
        """Drop the connection now; connection_lost releases what the request held."""
        if self.transport is not None:
            self.transport.abort()

    def shut_down(self) -> None:
        """The relay stops: a request in flight ends with an error the client can read (503, or an in-band
        error event in a stream), its upstream is closed, and so is the connection."""
        state = self.state
        if state == STREAM:
            self._stream_error("the relay stopped before the stream ended", "relay_stopped")
        elif state in (BODY, WAIT, BUFFER):
            self._answer(
                503, error_body("the relay stopped before the answer", "service_unavailable", 503), "relay_stopped"
            )
        self.close()

    def tick(self, now: float) -> None:
        """Every timeout and heartbeat, from the relay's one timer."""
        state = self.state
        if state == STREAM:
            if now >= self.deadline_at:
                self.relay.metrics.upstream_errors += 1
                self._stream_error("the relay's deadline passed before the stream ended", "deadline")
            elif now - self.last_write >= self.relay.config.heartbeat_s:
                if self.stream.at_boundary and not self.paused:  # a blank line mid-event would end the event
                    assert self.transport is not None
                    self.transport.write(HEARTBEAT_CHUNK if self.chunked_out else HEARTBEAT)
                    if self.stream.got_body:
                        self.relay.metrics.heartbeats_between += 1
                    else:
                        self.relay.metrics.heartbeats_waiting += 1
                self.last_write = now
        elif state == WAIT or state == BUFFER:
            if now >= self.deadline_at:
                self.relay.metrics.upstream_errors += 1
                message = (
                    "upstream sent no response headers within the deadline"
                    if state == WAIT
                    else "upstream did not answer within the deadline"
                )
                self._answer(504, error_body(message, "upstream_error", 504), "deadline")
        elif state == BODY:
            if now >= self.timer_at:
                seconds = min(self.relay.config.body_timeout_s, self.relay.config.deadline_s)
                self._answer(
                    408,
                    error_body(f"the request body did not arrive within {seconds:g} s", "invalid_request_error", 408),
                    "body_timeout",
                )
        elif state == HEAD:
            if now >= self.timer_at:
                if self.buf:  # a request head begun and not finished in time
                    self._reject(408, "the request head did not arrive in time")
                else:
                    self.close()  # idle
        elif state == LINGER and now >= self.timer_at:
            self.close()

    # -- the request ------------------------------------------------------------------------------

    def _head_data(self, data: bytes) -> None:
        if not self.buf:
            if data[:2] == b"\r\n":  # stray line ends between requests are ignored (RFC 9112 2.2)
                data = data.lstrip(b"\r\n")
            if not data:
                return
            self.timer_at = self.loop.time() + self.relay.config.body_timeout_s
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
        now = self.loop.time()
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
        self.state = BODY
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
        self.state = WAIT
        if self.relay.prefill is not None and req.method == "POST" and req.path in GENERATION_PATHS:
            self.connecting = asyncio.ensure_future(self._prefill_first(body))
            return
        self._send_upstream(body)

    async def _prefill_first(self, body: bytes) -> None:
        """A disaggregated pair: the prompt prefilled on the prefill instance, then the request to the decode one."""
        assert self.relay.prefill is not None and self.req is not None
        try:
            outcome = await self.relay.prefill.run(self.req.path, body, self.loop)
        except Exception as exc:
            internal_error(exc)
            outcome = PrefillOutcome(
                answer=(502, error_body("relay error in the prefill hop", "upstream_error", 502), "prefill_error")
            )
        self.connecting = None
        if self.state != WAIT:
            return
        if outcome.answer is not None:
            self._answer(*outcome.answer)
            return
        self.extra_headers = outcome.headers
        self._send_upstream(outcome.body)

    def _send_upstream(self, body: bytes) -> None:
        req = self.req
        assert req is not None
        length = len(body) if body or req.method == "POST" else None
        head = self.relay.upstream_head(req.method, req.path, length, self.relay.passed_fields(req))
        conn = self.relay.pool.take(self.loop.time())
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
            if self.state == WAIT:
                self.relay.metrics.upstream_errors += 1
                self._answer(
                    502,
                    error_body(f"upstream unreachable ({type(exc).__name__})", "upstream_error", 502),
                    "upstream_unreachable",
                )
            return
        self.connecting = None
        if self.state != WAIT or self.upstream is not None:  # the request ended while connecting
            self.relay.pool.put(conn, self.loop.time())
            return
        self.upstream = conn
        conn.send(head, body, self)

    def _pipelined(self) -> None:
        if self.state == HEAD and self.buf:
            self.data_received(b"")
