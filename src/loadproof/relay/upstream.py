"""The relay's side of the engine: kept-alive HTTP/1.1 connections to the one upstream of its config.

A connection carries one request at a time and reports to a handler (the client connection it serves):
`upstream_head(status, headers)`, `upstream_body(data)` for each read of body, `upstream_end(conn)` once
the body is complete, `upstream_lost(exc)` if the connection ends before that. A connection goes back to
the pool only after a complete answer on a connection the upstream keeps alive; idle ones older than the
keep-alive limit are closed instead of reused (shorter than the engine's own idle timeout, so a reused
connection is never one the engine is closing).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from loadproof.protocol.urls import path_of
from loadproof.relay.http import MAX_HEAD_BYTES, BadMessage, ChunkedDecoder, internal_error, parse_response_head


class Handler(Protocol):
    def upstream_head(self, status: int, headers: dict[str, str]) -> None: ...
    def upstream_body(self, data: bytes) -> None: ...
    def upstream_end(self, conn: UpstreamConnection) -> None: ...
    def upstream_lost(self, why: str) -> None: ...


_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE, _IDLE = range(5)


class UpstreamConnection(asyncio.Protocol):
    __slots__ = (
        "pool",
        "transport",
        "handler",
        "reusable",
        "closed",
        "idle_since",
        "_state",
        "_buf",
        "_chunks",
        "_remaining",
    )

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.handler: Any = None
        self.reusable = False
        self.closed = False
        self.idle_since = 0.0
        self._state = _IDLE
        self._buf = b""
        self._chunks: ChunkedDecoder | None = None
        self._remaining = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # create_connection gives a stream connection an asyncio.Transport (a BaseTransport is the signature's)
        self.transport = cast(asyncio.Transport, transport)

    def send(self, head: bytes, body: bytes, handler: Handler) -> None:
        assert self.transport is not None
        self.handler = handler
        self._state = _HEAD
        self._buf = b""
        self.reusable = False
        if len(body) <= 65536:
            self.transport.write(head + body)
        else:
            self.transport.write(head)
            self.transport.write(body)

    def data_received(self, data: bytes) -> None:
        try:
            self._received(data)
        except Exception as exc:
            internal_error(exc)
            self._fail("relay error")

    def _received(self, data: bytes) -> None:
        state = self._state
        if state == _CHUNKED:
            assert self._chunks is not None
            try:
                pieces = self._chunks.feed(data)
            except BadMessage:
                self._fail("malformed chunked body")
                return
            if pieces:
                self.handler.upstream_body(pieces[0] if len(pieces) == 1 else b"".join(pieces))
            if self._chunks.done:
                self._complete(not self._chunks.rest)
            return
        if state == _HEAD:
            self._head(data)
        elif state == _LENGTH:
            if len(data) >= self._remaining:
                extra = len(data) > self._remaining
                if self._remaining:
                    self.handler.upstream_body(data[: self._remaining])
                self._remaining = 0
                self._complete(not extra)
            else:
                self._remaining -= len(data)
                self.handler.upstream_body(data)
        elif state == _UNTIL_CLOSE:
            self.handler.upstream_body(data)
        else:  # bytes nobody asked for: this connection cannot be trusted with another request
            self.reusable = False
            self.close()

    def _head(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    self._fail("response head too large")
                else:
                    self._buf = buf
                return
            try:
                status, http11, headers = parse_response_head(buf[:end])
            except BadMessage:
                self._fail("malformed response head")
                return
            buf = buf[end + 4 :]
            if 100 <= status < 200:  # an interim answer: the real one follows
                continue
            break
        self._buf = b""
        connection = headers.get("connection", "").lower()
        self.reusable = "close" not in connection if http11 else "keep-alive" in connection
        encoding = headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length")
        if encoding.endswith("chunked"):
            self._state = _CHUNKED
            self._chunks = ChunkedDecoder()
        elif length is not None and length.isascii() and length.isdigit():
            self._state = _LENGTH
            self._remaining = int(length)
        elif status in (204, 304):
            self._state = _LENGTH
            self._remaining = 0
        else:
            self._state = _UNTIL_CLOSE
            self.reusable = False
        self.handler.upstream_head(status, headers)
        if self.handler is None:  # the handler gave up on the answer already
            return
        if buf or self._state == _LENGTH and self._remaining == 0:
            self._received(buf)

    def _complete(self, clean: bool) -> None:
        handler = self.handler
        self.handler = None
        self._state = _IDLE
        self._chunks = None
        self.reusable = self.reusable and clean and not self.closed
        if handler is not None:
            handler.upstream_end(self)

    def _fail(self, why: str) -> None:
        handler = self.handler
        self.handler = None
        self.close()
        if handler is not None:
            handler.upstream_lost(why)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        handler = self.handler
        if handler is None:
            return
        if self._state == _UNTIL_CLOSE:  # the close is the end of the body
            self._complete(False)
            return
        self.handler = None
        handler.upstream_lost(type(exc).__name__ if exc is not None else "connection closed")

    def eof_received(self) -> bool:
        return False  # close our side too: connection_lost follows

    def detach(self) -> None:
        """The handler is done with this connection before its answer ended: close it (the engine sees
        the client's abort and frees the request)."""
        self.handler = None
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()


class UpstreamPool:
    """Connections to the one upstream: idle ones kept for reuse up to `keepalive_s`, most recent first."""

    def __init__(self, base_url: str, keepalive_s: float, connect_timeout_s: float = 30.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the upstream must be an http(s) URL")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.base_url = base_url
        self.keepalive_s = keepalive_s
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[UpstreamConnection] = []

    def target(self, path: str) -> str:
        """The request target of `path` on the upstream, under the path prefix of its base URL, if any."""
        return path_of(self.base_url, path)

    def take(self, now: float) -> UpstreamConnection | None:
        """A kept-alive idle connection, or None (then `connect`)."""
        idle = self._idle
        while idle:
            conn = idle.pop()
            if (
                not conn.closed
                and now - conn.idle_since < self.keepalive_s
                and conn.transport is not None
                and not conn.transport.is_closing()
            ):
                return conn
            conn.close()
        return None

    async def connect(self) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(
                lambda: UpstreamConnection(self),
                self.host,
                self.port,
                ssl=self.ssl,
                server_hostname=self.host if self.ssl else None,
            ),
            self.connect_timeout_s,
        )
        return conn

    def put(self, conn: UpstreamConnection, now: float) -> None:
        if conn.reusable and not conn.closed:
            conn.idle_since = now
            self._idle.append(conn)
        else:
            conn.close()

    def forget(self, conn: UpstreamConnection) -> None:
        try:
            self._idle.remove(conn)
        except ValueError:
            pass

    def close_all(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
