"""One request on a client's connection, from the relay's side of it: its state, the upstream's answer relayed
to the client (streamed or whole), the answers the relay gives itself, and the request's end (logged, its slot and
upstream released, the connection kept for the next request or closed). `relay.connection.ClientConnection` is an
Exchange that also reads the requests and sends them upstream."""

from __future__ import annotations

import asyncio

from loadproof.protocol.openai import error_body
from loadproof.protocol.sse import HEARTBEAT, encode_data
from loadproof.relay.http import ChunkedDecoder, RequestHead, response_head
from loadproof.relay.state import RelayState
from loadproof.relay.stream import StreamWatch
from loadproof.relay.upstream import UpstreamConnection

HEARTBEAT_CHUNK = b"%x\r\n%b\r\n" % (len(HEARTBEAT), HEARTBEAT)
_LAST_CHUNK = b"0\r\n\r\n"
_STREAM_HEADERS = b"cache-control: no-cache\r\nx-accel-buffering: no\r\n"
_LINGER_S = 2.0  # after an answer sent before the body was read: how long the rest may still arrive
_INF = float("inf")

# a connection's states, one request at a time (ClientConnection's docstring has the order)
HEAD, BODY, WAIT, STREAM, BUFFER, LINGER, CLOSED = range(7)


class Exchange:
    """The state of a client connection and of its request in flight, and everything that answers the request."""

    def __init__(self, relay: RelayState) -> None:
        assert relay.loop is not None, "a connection comes once the relay listens"
        self.relay = relay
        self.loop: asyncio.AbstractEventLoop = relay.loop
        self.transport: asyncio.Transport | None = None
        self.state = HEAD
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

    # -- the upstream's answer (called by UpstreamConnection) ---------------------------------------

    def upstream_head(self, status: int, headers: dict[str, str]) -> None:
        content_type = headers.get("content-type", "")
        if status == 200 and content_type.startswith("text/event-stream"):
            req = self.req
            assert req is not None and self.transport is not None
            self.state = STREAM
            ends = self.relay.end_events.get(req.path)
            if ends:
                self.stream = StreamWatch(ends)
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
            self.last_write = self.loop.time()
            if self.paused and self.upstream is not None:
                self.upstream.pause_reading()
        else:
            self.state = BUFFER
            self.resp_status = status
            self.resp_type = content_type or "application/json"

    def upstream_body(self, data: bytes) -> None:
        if self.state != STREAM:
            self.resp_parts.append(data)
            return
        self.stream.feed(data)
        assert self.transport is not None
        if self.chunked_out:
            self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        else:
            self.transport.write(data)
        self.last_write = self.loop.time()

    def upstream_end(self, conn: UpstreamConnection) -> None:
        self.upstream = None
        self.relay.pool.put(conn, self.loop.time())
        if self.state == STREAM:
            if not self.stream.at_boundary:
                self.relay.metrics.upstream_errors += 1
                self._stream_error("upstream closed the stream mid-event", "upstream_error")
            elif self.stream.error_event:
                self.relay.metrics.upstream_errors += 1
                self._end_stream("upstream_error_event")
            else:
                self._end_stream("ok")
        elif self.state == BUFFER:
            body = b"".join(self.resp_parts)
            self._answer(self.resp_status, body, "ok" if self.resp_status == 200 else "upstream_status", self.resp_type)

    def upstream_lost(self, why: str) -> None:
        self.upstream = None
        self.relay.metrics.upstream_errors += 1
        if self.state == STREAM:
            self._stream_error(f"upstream failed mid-stream ({why})", "upstream_error")
        elif self.state == WAIT:
            self._answer(
                502,
                error_body(f"upstream closed the connection before answering ({why})", "upstream_error", 502),
                "upstream_unreachable",
            )
        elif self.state == BUFFER:
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
        if self.state == BODY or req.chunked:
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
        if close or self.state == CLOSED:
            self._linger()
            return
        self.state = HEAD
        now = self.loop.time()
        self.timer_at = now + self.relay.config.idle_timeout_s
        if self.buf:  # a pipelined request: read next, before anything that arrives after it
            self.timer_at = now + self.relay.config.body_timeout_s
            self.loop.call_soon(self._pipelined)
        if self.transport is not None:
            self.transport.resume_reading()

    def _pipelined(self) -> None:
        """Read the request that waits in `buf` (ClientConnection)."""
        raise NotImplementedError

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
        if self.state == CLOSED or self.transport is None:
            return
        self.state = LINGER
        self.buf = b""
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.timer_at = self.loop.time() + _LINGER_S
        else:
            self.transport.close()

    def _log(self, status: int, outcome: str) -> None:
        req = self.req
        assert req is not None
        path = req.path if req.path in self.relay.paths else "(other)"  # an arbitrary path could hold anything
        self.relay.access_log(req.method, path, status, outcome, self.head_sent, self.loop.time() - self.started)
