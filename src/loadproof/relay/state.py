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
from loadproof.protocol.routes import route_names, route_of
from loadproof.protocol.routes.base import JSON
from loadproof.relay.config import RelayConfig
from loadproof.relay.http import RequestHead
from loadproof.relay.metrics import RelayMetrics
from loadproof.relay.prefill import PrefillHop
from loadproof.relay.upstream import UpstreamPool

log = logging.getLogger("loadproof.relay")

# what the relay serves besides the APIs of the route adapters (protocol.routes: each adapter's path, POST)
OTHER_PATHS = {
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
_JSON = b"content-type: application/json\r\n"


def served_paths() -> dict[str, str]:
    """Every path the relay serves and its method: each registered route adapter's (its API's path, POST, a
    plug-in's included), then OTHER_PATHS."""
    return {**{route_of(name).path: "POST" for name in route_names()}, **OTHER_PATHS}


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
        self.paths = served_paths()
        routes = [route_of(name) for name in route_names()]
        # what of a client's request goes on to the upstream besides its body: the headers its route adapter sends
        # (the Messages API's version) and, for a body that is not JSON, its content type (a multipart form's
        # boundary with it). A JSON body goes as JSON whatever the client said, as it always did (vLLM refuses
        # another type, and clients that post bytes label them application/octet-stream)
        self._passed = {
            r.path: (*(("content-type",) if r.content_type != JSON else ()), *(h.lower() for h in r.headers))
            for r in routes
        }
        # the `event:` names that end a route's stream, where an event does (relay.stream)
        self.end_events = {r.path: frozenset(e.encode() for e in r.end_events) for r in routes if r.end_events}
        self.connections: set[Connection] = set()
        self.loop: asyncio.AbstractEventLoop | None = None

    def authorized(self, headers: dict[str, str]) -> bool:
        if not self._keys:
            return True
        header = headers.get("authorization", "")
        # a bearer token, or the Messages API's own header (the anthropic SDK sends its key as `x-api-key`)
        token = (header[7:] if header[:7].lower() == "bearer " else headers.get("x-api-key", "")).encode("latin-1")
        ok = False
        for key in self._keys:  # compare with every key, always: no early exit to time
            ok |= hmac.compare_digest(token, key)
        return ok

    def refusal(self, req: RequestHead) -> Answer | None:
        """The relay's own answer to a request it does not forward (an unknown path or method, /health,
        /metrics, no key, the engine restarting, a declared body over the limit); None: forward it."""
        method = self.paths.get(req.path)
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

    def passed_fields(self, req: RequestHead) -> bytes:
        """The client's header fields the upstream gets as they came: a form's content type and the route's own
        headers (a field whose value holds a control character is not passed on)."""
        fields = b""
        for name in self._passed.get(req.path, ()):
            value = req.headers.get(name)
            if value and value.isprintable():
                fields += f"{name}: {value}\r\n".encode("latin-1")
        return fields

    def upstream_head(self, method: str, path: str, length: int | None, fields: bytes = b"") -> bytes:
        """The upstream request's head: `fields` (passed_fields) added, and a body's content type JSON unless
        they hold a form's."""
        start = self._heads.get((method, path))
        if start is None:
            upstream_path = self.pool.target(_UPSTREAM_PATHS.get(path, path))
            start = f"{method} {upstream_path} HTTP/1.1\r\n".encode("latin-1") + self._upstream_fields
            self._heads[(method, path)] = start
        if length is None:
            return start + fields + b"\r\n"
        if not fields.startswith(b"content-type:"):
            fields = _JSON + fields
        return start + fields + b"content-length: %d\r\n\r\n" % length

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
