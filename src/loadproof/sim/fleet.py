"""A simulated fleet: N simulated engines behind a model of a vllm-router policy (`routing.Router`), served by one
process on N + 2 ports, as a real fleet is laid out (`loadproof sim --replicas N --router-policy P`).

- The router's port (`--port`): each route adapter's path is routed. The request's body is read, its prompt's
  KV block hashes computed as an engine would key them (`SimServer.prompt_blocks`), its session taken from the
  first of `routing.SESSION_HEADERS` it carries, and the policy picks a replica given each replica's requests
  in flight (sent by the router and not yet answered); the replica serves it in process, its answer streamed
  back unchanged. Anything else (/health, /v1/models, /tokenize, /metrics, /sim/...) goes to replica 0, as
  vllm-router forwards its GETs to one worker: its /metrics is never the router's.
- Each replica's own port: the whole simulator, its KV cache, scheduler, /metrics, /sim/faults and /sim/state,
  as a replica's engine serves them; a run scrapes them as a real fleet's replicas.
- The router's metrics port: `/metrics` in vllm-router's Prometheus names, each replica labelled by its URL
  (`worker="http://HOST:PORT"`): requests routed (`vllm_router_processed_requests_total`), decisions by policy,
  requests by route, answers by outcome (a 5xx a failure), in flight, health, active workers.

What it does not model: the router's own latency, retries and circuit breaker (a replica that refuses, crashes
or hangs is still routed to; its port alone closes on `refuse`, and `crash` ends the whole process).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route as HTTPRoute

from loadproof.protocol.routes import ROUTES, Route
from loadproof.protocol.urls import base_url
from loadproof.routing import SESSION_HEADERS, Router
from loadproof.sim.config import SimConfig
from loadproof.sim.server import SimServer

Scope = dict[str, Any]


class SimFleet:
    """The fleet's one ASGI app: each connection is served by what listens on the port it came in on."""

    def __init__(
        self, config: SimConfig, router: Router, host: str, port: int, replica_ports: list[int], metrics_port: int
    ) -> None:
        if len(replica_ports) != router.replicas:
            raise ValueError(f"{len(replica_ports)} replica ports for {router.replicas} replicas")
        self.router = router
        self.sims = [SimServer(config) for _ in replica_ports]
        self.urls = [base_url(host, p) for p in replica_ports]
        self.in_flight = [0] * router.replicas
        self.outcomes = [Counter[str]() for _ in replica_ports]
        self.by_route: Counter[str] = Counter()
        self._routes = {r.path: r for r in map(ROUTES.get, ROUTES.in_order())}
        metrics = Starlette(routes=[HTTPRoute("/metrics", self.metrics)])
        self._apps: dict[int, Any] = {p: sim.app for p, sim in zip(replica_ports, self.sims, strict=True)}
        self._apps[metrics_port] = metrics
        self._front_port = port
        self._lifespan_app = Starlette(lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for sim in self.sims:  # each replica's engine loop
                await stack.enter_async_context(sim.lifespan(sim.app))
            yield

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan_app(scope, receive, send)
            return
        port = (scope.get("server") or (None, None))[1]
        app = self._apps.get(port) if isinstance(port, int) and port != self._front_port else None
        if app is not None:
            await app(scope, receive, send)
            return
        route = self._routes.get(scope.get("path", "")) if scope.get("method") == "POST" else None
        if route is None:
            await self.sims[0].app(scope, receive, send)
            return
        await self._route(route, scope, receive, send)

    async def _route(self, route: Route, scope: Scope, receive: Any, send: Any) -> None:
        """Read the body, let the policy pick a replica, and have the replica serve it as it came."""
        body = await HTTPRequest(scope, receive).body()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        session = next((headers[h] for h in SESSION_HEADERS if headers.get(h)), None)
        blocks = self.sims[0].prompt_blocks(route, body, headers.get("content-type", ""))
        replica = self.router.pick(blocks, session, self.in_flight)
        self.by_route[route.path] += 1
        self.in_flight[replica] += 1
        given = False
        status = [0]

        async def replayed() -> dict[str, Any]:  # the body once, then the client's own events (a disconnect)
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            message: dict[str, Any] = await receive()
            return message

        async def sent(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.sims[replica].app(scope, replayed, sent)
        finally:
            self.in_flight[replica] -= 1
            self.outcomes[replica]["failure" if status[0] >= 500 or status[0] == 0 else "success"] += 1

    async def metrics(self, request: HTTPRequest) -> Response:
        return PlainTextResponse(self.render_metrics(), media_type="text/plain; version=0.0.4")

    def render_metrics(self) -> str:
        """The router's counters in vllm-router's names (see the module doc)."""
        policy = self.router.policy
        lines = ["# TYPE vllm_router_requests_total counter"]
        lines += [f'vllm_router_requests_total{{route="{path}"}} {n}' for path, n in sorted(self.by_route.items())]
        lines += ["# TYPE vllm_router_processed_requests_total counter"]
        lines += [
            f'vllm_router_processed_requests_total{{worker="{url}"}} {n}'
            for url, n in zip(self.urls, self.router.decisions, strict=True)
        ]
        lines += ["# TYPE vllm_router_policy_decisions_total counter"]
        lines += [
            f'vllm_router_policy_decisions_total{{policy="{policy}",worker="{url}"}} {n}'
            for url, n in zip(self.urls, self.router.decisions, strict=True)
        ]
        lines += ["# TYPE vllm_router_cb_outcomes_total counter"]
        for url, outcomes in zip(self.urls, self.outcomes, strict=True):
            lines += [
                f'vllm_router_cb_outcomes_total{{worker="{url}",outcome="{o}"}} {outcomes[o]}'
                for o in ("success", "failure")
            ]
        lines += ["# TYPE vllm_router_running_requests gauge"]
        lines += [
            f'vllm_router_running_requests{{worker="{url}"}} {n}'
            for url, n in zip(self.urls, self.in_flight, strict=True)
        ]
        lines += ["# TYPE vllm_router_worker_health gauge"]
        lines += [f'vllm_router_worker_health{{worker="{url}"}} 1' for url in self.urls]
        lines += ["# TYPE vllm_router_active_workers gauge", f"vllm_router_active_workers {len(self.urls)}"]
        return "\n".join(lines) + "\n"
