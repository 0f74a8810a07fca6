"""The relay: an OpenAI-compatible streaming reverse proxy built for million-token prompts.

What it guarantees, and why (the relays people put in front of engines get each of these wrong):
- the upstream comes from config only, never from a request;
- bounded concurrency: a request beyond the pool gets an immediate 429, never a hang, and its slot is
  released on every path (success, upstream error, deadline, client disconnect);
- a total deadline per request, independent of any idle timeout (default: an hour);
- streams get their response headers at once, then `:` comment heartbeats while the engine is silent
  (vLLM sends nothing during queueing and prefill, and 60 s idle timeouts cut long prompts);
- an upstream failure after the stream started becomes an in-band error event and a clean end of the
  stream; before the first byte it becomes a proper HTTP error (502, or 504 for the deadline);
- when the client leaves, the upstream connection is closed at once, so the engine aborts the request
  and frees its KV cache;
- API keys compared in constant time; a request body size limit; logs that hold no key, no prompt and
  no upstream address.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, generate_latest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from loadproof.protocol.openai import error_body
from loadproof.protocol.sse import encode_comment, encode_data

log = logging.getLogger("loadproof.relay")


@dataclass(frozen=True)
class RelayConfig:
    upstream: str
    max_in_flight: int = 64
    deadline_s: float = 3600.0
    heartbeat_s: float = 5.0
    max_body_bytes: int = 64 * 1024 * 1024  # a 1M-token prompt is about 4-7 MB of JSON
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    upstream_keepalive_s: float = 4.0  # shorter than uvicorn's 5 s default keep-alive on the engine side
    upstream_api_key: str | None = field(default=None, repr=False)


class RelayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, for soak runs
        self.in_flight = Gauge("loadproof_relay_in_flight", "requests being relayed", registry=self.registry)
        self.requests = Counter("loadproof_relay_requests", "requests received", ["outcome"], registry=self.registry)
        self.rejected = Counter("loadproof_relay_rejected", "requests refused: pool full", registry=self.registry)
        self.heartbeats = Counter("loadproof_relay_heartbeats", "SSE heartbeats sent", registry=self.registry)
        self.upstream_errors = Counter("loadproof_relay_upstream_errors", "upstream failures", registry=self.registry)
        self.disconnects = Counter("loadproof_relay_client_disconnects", "clients that left mid-request",
                                   registry=self.registry)


class Relay:
    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.metrics = RelayMetrics()
        self._slots = asyncio.Semaphore(config.max_in_flight)
        self._in_flight = 0
        self._session: aiohttp.ClientSession | None = None
        self.paused_reason: str | None = None  # set by a supervisor while the engine restarts
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.forward, methods=["POST"]),
                Route("/v1/completions", self.forward, methods=["POST"]),
                Route("/v1/models", self.forward, methods=["GET"]),
                Route("/health", self.health, methods=["GET"]),
                Route("/metrics", self.prometheus, methods=["GET"]),
            ],
            lifespan=self._lifespan,
        )

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self._open()
        try:
            yield
        finally:
            await self._close()

    async def _open(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=self.config.upstream_keepalive_s)
        self._session = aiohttp.ClientSession(connector=connector, read_bufsize=4 * 1024 * 1024,
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def health(self, request: Request) -> Response:
        if self.paused_reason:
            return JSONResponse({"status": "unavailable", "reason": self.paused_reason}, status_code=503)
        return JSONResponse({"status": "ok", "in_flight": self._in_flight})

    async def prometheus(self, request: Request) -> Response:
        return Response(generate_latest(self.metrics.registry), media_type="text/plain; version=0.0.4")

    def _authorized(self, request: Request) -> bool:
        if not self.config.api_keys:
            return True
        header = request.headers.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else ""
        ok = False
        for key in self.config.api_keys:  # compare with every key, always: no early exit to time
            ok |= hmac.compare_digest(token.encode(), key.encode())
        return ok

    def _access_log(self, request: Request, status: int, outcome: str, started: float, stream: bool) -> None:
        self.metrics.requests.labels(outcome).inc()
        log.info(json.dumps({"method": request.method, "path": request.url.path, "status": status,
                             "outcome": outcome, "stream": stream, "duration_s": round(time.monotonic() - started, 3)}))

    async def forward(self, request: Request) -> Response:
        started = time.monotonic()
        if not self._authorized(request):
            self._access_log(request, 401, "unauthorized", started, False)
            return _error(401, "missing or invalid API key", "authentication_error")
        if self.paused_reason:
            self._access_log(request, 503, "engine_unavailable", started, False)
            return _error(503, f"engine unavailable: {self.paused_reason}", "service_unavailable")
        body = b""
        if request.method == "POST":
            declared = request.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.config.max_body_bytes:
                self._access_log(request, 413, "too_large", started, False)
                return _error(413, f"request body over {self.config.max_body_bytes} bytes", "invalid_request_error")
            try:
                body = await _read_limited(request, self.config.max_body_bytes)
            except _TooLarge:
                self._access_log(request, 413, "too_large", started, False)
                return _error(413, f"request body over {self.config.max_body_bytes} bytes", "invalid_request_error")
            except ClientDisconnect:
                self.metrics.disconnects.inc()
                self._access_log(request, 499, "client_disconnect", started, False)
                return Response(status_code=499)
        if self._slots.locked():
            self.metrics.rejected.inc()
            self._access_log(request, 429, "rejected", started, False)
            return _error(429, f"relay busy: all {self.config.max_in_flight} slots in use; retry later",
                          "rate_limit_error")
        await self._slots.acquire()
        self._in_flight += 1
        self.metrics.in_flight.inc()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._in_flight -= 1
                self.metrics.in_flight.dec()
                self._slots.release()

        try:
            deadline = started + self.config.deadline_s
            upstream = await self._open_upstream(request, body, deadline)
        except BaseException as exc:
            release()
            if isinstance(exc, _UpstreamFailed):
                self.metrics.upstream_errors.inc()
                self._access_log(request, exc.status, exc.outcome, started, False)
                return _error(exc.status, exc.message, "upstream_error")
            raise
        # stream whatever the engine streams (decided by its answer, not by guessing from the request)
        stream = upstream.status == 200 and upstream.headers.get("content-type", "").startswith("text/event-stream")
        if not stream:
            try:
                data = await asyncio.wait_for(upstream.read(), max(0.0, deadline - time.monotonic()))
                self._access_log(request, upstream.status, "ok" if upstream.status == 200 else "upstream_status",
                                 started, False)
                return Response(data, status_code=upstream.status,
                                media_type=upstream.headers.get("content-type", "application/json"))
            except (asyncio.TimeoutError, aiohttp.ClientError):
                self.metrics.upstream_errors.inc()
                self._access_log(request, 504, "deadline", started, False)
                return _error(504, "upstream did not answer within the deadline", "upstream_error")
            finally:
                upstream.close()
                release()
        return StreamingResponse(self._relay_stream(request, upstream, deadline, started, release),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def _open_upstream(self, request: Request, body: bytes, deadline: float) -> aiohttp.ClientResponse:
        assert self._session is not None
        headers = {"Content-Type": "application/json"}
        if self.config.upstream_api_key:
            headers["Authorization"] = f"Bearer {self.config.upstream_api_key}"
        url = self.config.upstream.rstrip("/") + request.url.path
        try:
            return await asyncio.wait_for(
                self._session.request(request.method, url, data=body or None, headers=headers),
                max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise _UpstreamFailed(504, "deadline", "upstream sent no response headers within the deadline") from None
        except aiohttp.ClientError as exc:
            raise _UpstreamFailed(502, "upstream_unreachable", f"upstream unreachable ({exc.__class__.__name__})") from None

    async def _relay_stream(self, request: Request, upstream: aiohttp.ClientResponse, deadline: float,
                            started: float, release) -> AsyncIterator[bytes]:
        outcome = "ok"
        at_boundary = True
        pending: asyncio.Task[bytes] | None = None
        try:
            yield encode_comment("relay: waiting for the engine")  # headers and a first byte at once
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(upstream.content.readany())
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    outcome = "deadline"
                    self.metrics.upstream_errors.inc()
                    yield _stream_error("the relay's deadline passed before the stream ended", at_boundary)
                    return
                done, _ = await asyncio.wait({pending}, timeout=min(self.config.heartbeat_s, remaining))
                if not done:
                    if at_boundary:  # a comment mid-event would corrupt it
                        self.metrics.heartbeats.inc()
                        yield encode_comment("keep-alive")
                    continue
                try:
                    data = pending.result()
                except (aiohttp.ClientError, ConnectionError) as exc:
                    outcome = "upstream_error"
                    self.metrics.upstream_errors.inc()
                    yield _stream_error(f"upstream failed mid-stream ({exc.__class__.__name__})", at_boundary)
                    return
                finally:
                    pending = None
                if not data:
                    if not at_boundary:
                        outcome = "upstream_error"
                        self.metrics.upstream_errors.inc()
                        yield _stream_error("upstream closed the stream mid-event", False)
                    return
                at_boundary = data.endswith(b"\n\n")
                yield data
        except (asyncio.CancelledError, GeneratorExit):
            outcome = "client_disconnect"
            self.metrics.disconnects.inc()
            raise
        finally:
            if pending is not None:
                pending.cancel()
            upstream.close()  # closes the connection: the engine sees the abort and frees the request
            release()
            self._access_log(request, 200, outcome, started, True)


class _UpstreamFailed(Exception):
    def __init__(self, status: int, outcome: str, message: str) -> None:
        super().__init__(message)
        self.status, self.outcome, self.message = status, outcome, message


class _TooLarge(Exception):
    pass


async def _read_limited(request: Request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str, kind: str) -> Response:
    return Response(error_body(message, kind, status), status_code=status, media_type="application/json")


def _stream_error(message: str, at_boundary: bool) -> bytes:
    prefix = b"" if at_boundary else b"\n\n"  # end a half-sent event first, so the error stands alone
    return prefix + encode_data(error_body(message, "upstream_error", 502))
