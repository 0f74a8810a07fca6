"""What every client connection of one relay shares: its config, counters and upstream pool, the routes it
serves, its keys, and the answers it gives itself (a refusal, /health, /metrics) without the engine."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import NamedTuple, Protocol

from prometheus_client import generate_latest

from loadproof.protocol.openai import error_body
from loadproof.relay.config import RelayConfig
from loadproof.relay.http import RequestHead
from loadproof.relay.metrics import RelayMetrics
from loadproof.relay.prefill import PrefillHop
from loadproof.relay.upstream import UpstreamPool

log = logging.getLogger("loadproof.relay")

ROUTES = {
    "/v1/chat/completions": "POST",
    "/v1/completions": "POST",
    "/v1/embeddings": "POST",
    "/v1/rerank": "POST",
    "/v1/models": "GET",
    "/tokenize": "POST",
    "/detokenize": "POST",
    "/version": "GET",
    "/engine/metrics": "GET",
    "/health": "GET",
    "/metrics": "GET",
}
# the engine's own /metrics, under a path of its own: the relay's /metrics never holds an engine figure, and a
# scraper that reads the engine through the relay cannot take the relay's counters for the engine's
ENGINE_METRICS = "/engine/metrics"
_UPSTREAM_PATHS = {ENGINE_METRICS: "/metrics"}


class Answer(NamedTuple):
    """A whole answer the relay gives itself; `outcome` None: not a relayed request, not logged."""

    status: int
    body: bytes
    outcome: str | None
    content_type: str = "application/json"


class Connection(Protocol):
    """A client connection as the relay's timer and its stop see it (relay.connection.ClientConnection)."""

    def idle(self) -> bool: ...
    def tick(self, now: float) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def shut_down(self) -> None: ...


class RelayState:
    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.metrics = RelayMetrics()
        self.paused_reason: str | None = None  # set by a supervisor while the engine restarts
        self.pool = UpstreamPool(config.upstream, config.upstream_keepalive_s)
        self._keys = tuple(key.encode() for key in config.api_keys)
        auth = f"authorization: Bearer {config.upstream_api_key}\r\n" if config.upstream_api_key else ""
        self._upstream_fields = f"host: {self.pool.host_header}\r\n{auth}accept: */*\r\n".encode("latin-1")
        self.prefill = (
            PrefillHop(config.prefill, config.upstream_keepalive_s, f"{auth}accept: */*\r\n")
            if config.prefill is not None
            else None
        )
        self.metrics.prefill = self.prefill
        self._heads: dict[tuple[str, str], bytes] = {}
        self.connections: set[Connection] = set()
        self.loop: asyncio.AbstractEventLoop | None = None

    def authorized(self, headers: dict[str, str]) -> bool:
        if not self._keys:
            return True
        header = headers.get("authorization", "")
        token = header[7:].encode("latin-1") if header[:7].lower() == "bearer " else b""
        ok = False
        for key in self._keys:  # compare with every key, always: no early exit to time
            ok |= hmac.compare_digest(token, key)
        return ok

    def refusal(self, req: RequestHead) -> Answer | None:
        """The relay's own answer to a request it does not forward (an unknown path or method, /health,
        /metrics, no key, the engine restarting, a declared body over the limit); None: forward it."""
        method = ROUTES.get(req.path)
        if method is None:
            return Answer(404, error_body("not found", "invalid_request_error", 404), "not_found")
        if req.method != method:
            return Answer(
                405, error_body(f"{req.method} not allowed here", "invalid_request_error", 405), "method_not_allowed"
            )
        if req.path == "/health":
            return Answer(*self.health(), None)
        if req.path == "/metrics":
            if self.authorized(req.headers):
                return Answer(
                    200, generate_latest(self.metrics.registry), None, "text/plain; version=0.0.4; charset=utf-8"
                )
            return Answer(401, error_body("missing or invalid API key", "authentication_error", 401), None)
        if not self.authorized(req.headers):
            return Answer(401, error_body("missing or invalid API key", "authentication_error", 401), "unauthorized")
        if self.paused_reason:
            return Answer(
                503,
                error_body(f"engine unavailable: {self.paused_reason}", "service_unavailable", 503),
                "engine_unavailable",
            )
        if req.content_length is not None and req.content_length > self.config.max_body_bytes:
            return self.too_large()
        return None

    def too_large(self) -> Answer:
        limit = self.config.max_body_bytes
        return Answer(413, error_body(f"request body over {limit} bytes", "invalid_request_error", 413), "too_large")

    def busy(self) -> Answer | None:
        """A 429 when every slot is taken (counted); None: a slot is free."""
        config = self.config
        if self.metrics.in_flight < config.max_in_flight:
            return None
        self.metrics.rejected += 1
        return Answer(
            429,
            error_body(f"relay busy: all {config.max_in_flight} slots in use; retry later", "rate_limit_error", 429),
            "rejected",
        )

    def upstream_head(self, method: str, path: str, length: int | None) -> bytes:
        start = self._heads.get((method, path))
        if start is None:
            upstream_path = self.pool.target(_UPSTREAM_PATHS.get(path, path))
            start = f"{method} {upstream_path} HTTP/1.1\r\n".encode("latin-1") + self._upstream_fields
            self._heads[(method, path)] = start
        if length is None:
            return start + b"\r\n"
        return start + b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % length

    def access_log(self, method: str, path: str, status: int, outcome: str, stream: bool, seconds: float) -> None:
        requests = self.metrics.requests
        requests[outcome] = requests.get(outcome, 0) + 1
        if log.isEnabledFor(logging.INFO):
            log.info(
                json.dumps(
                    {
                        "method": method,
                        "path": path,
                        "status": status,
                        "outcome": outcome,
                        "stream": stream,
                        "duration_s": round(seconds, 3),
                    }
                )
            )

    def health(self) -> tuple[int, bytes]:
        if self.paused_reason:
            return 503, json.dumps({"status": "unavailable", "reason": self.paused_reason}).encode()
        return 200, json.dumps({"status": "ok", "in_flight": self.metrics.in_flight}).encode()
