"""`loadproof sim`: the simulator as an OpenAI-compatible HTTP server on a scaled real-time clock.

One asyncio task drives the scheduler: it schedules a step, sleeps the step's modeled duration divided
by `time_scale`, completes the step and hands each sampled token to its request's stream. Endpoints: one per
route adapter (`protocol.routes.ROUTES`, each at its path), the body read by the adapter's `parse` and the
answer written by its `Writer` (streamed) or `whole`; a generating model serves the routes that stream, a pooling
model (`runner = "pooling"`) the pooling routes (each input a prefill), and the other kind's routes are 404 as
vLLM's. Then /tokenize, /v1/models, /version, /health, /metrics (vLLM's names; durations in the wall seconds
its clients measure, whatever the time scale), and the control endpoint /sim/faults (GET, POST) with /sim/state
for tests. A client that disconnects aborts its request, which frees its blocks before the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route as HTTPRoute

from loadproof import __version__
from loadproof.protocol.request import Request, Sampling
from loadproof.protocol.routes import ROUTES, Route
from loadproof.protocol.routes.base import Answer, Writer
from loadproof.protocol.routes.chat import messages_of
from loadproof.sim import text
from loadproof.sim.config import FaultConfig, SimConfig
from loadproof.sim.metrics import render_metrics
from loadproof.sim.prompt import MediaCache, MediaRules, Prompt, prompt_of
from loadproof.sim.scheduler import Scheduler, SimRequest
from loadproof.sim.stream import Stream, num_tokens

ERROR_MID_STREAM = "simulated engine error mid-stream"
Handler = Callable[[HTTPRequest], Awaitable[Response]]


class RequireKey:
    """As vLLM with `--api-key`: every /v1 path needs `Authorization: Bearer KEY`, else 401 (pure ASGI, so
    streams pass through untouched); /health, /metrics and the rest stay open."""

    def __init__(self, app: Any, key: str) -> None:
        self.app = app
        self._expected = f"Bearer {key}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class DroppedConnection(Exception):
    """Raised inside a response body to cut the connection without a clean end (the `drop` fault)."""


class SimServer:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        # /metrics in the wall seconds its clients measure, not the modeled seconds of --time-scale
        self.scheduler = Scheduler(config, seconds_per_modeled_s=1 / config.time_scale)
        self.faults = config.faults
        self.streams: dict[str, Stream] = {}
        self.num_requests = 0
        self.rules = MediaRules(config)
        self.mm_cache = MediaCache(config.mm_cache_items)
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._t0 = time.perf_counter()
        self.on_refuse: Any = None  # set by the runner: closes the listening sockets
        routes = [HTTPRoute(r.path, self._endpoint(r), methods=["POST"]) for r in map(ROUTES.get, ROUTES.in_order())]
        self.app = Starlette(
            routes=[
                HTTPRoute("/health", self.health),
                HTTPRoute("/version", self.version),
                HTTPRoute("/v1/models", self.models),
                HTTPRoute("/tokenize", self.tokenize, methods=["POST"]),
                *routes,
                HTTPRoute("/metrics", self.metrics),
                HTTPRoute("/sim/faults", self.get_faults, methods=["GET"]),
                HTTPRoute("/sim/faults", self.set_faults, methods=["POST"]),
                HTTPRoute("/sim/state", self.state),
            ],
            lifespan=self.lifespan,
        )

    # -- the engine loop --------------------------------------------------------------------------------
    def now_s(self) -> float:
        """Modeled seconds since start."""
        return (time.perf_counter() - self._t0) * self.config.time_scale

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._wake = asyncio.Event()
        self._t0 = time.perf_counter()
        self._loop_task = asyncio.create_task(self._engine_loop())
        try:
            yield
        finally:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task

    async def _engine_loop(self) -> None:
        assert self._wake is not None
        next_wall = time.perf_counter()
        while True:
            if "hang" in self.faults.active:
                await asyncio.sleep(0.05)  # stuck: /health still answers, no token comes
                continue
            step = self.scheduler.schedule()
            if step is None:
                self._wake.clear()
                await self._wake.wait()
                next_wall = time.perf_counter()
                continue
            duration = self.scheduler.step_duration_s(step)
            if "slow" in self.faults.active:
                duration *= self.faults.slowdown
            next_wall = max(next_wall, time.perf_counter() - 0.05) + duration / self.config.time_scale
            delay = next_wall - time.perf_counter()
            await asyncio.sleep(max(0.0, delay))
            for emitted in self.scheduler.complete(step, self.now_s()):
                stream = self.streams.get(emitted.request.request_id)
                if stream is None:
                    continue
                last = emitted.finished
                if not last and not stream.ignore_eos and emitted.request.num_output >= stream.natural_end:
                    self.scheduler.finish_stop(emitted.request)  # its finish reason rides on this token's chunk
                    last = True
                stream.tokens.put_nowait((emitted.request.num_output - 1, last))

    def _submit(self, prompt: Prompt, request: Request, thinks: bool, pooling: bool = False) -> Stream:
        num_prompt = len(prompt.tokens)
        max_tokens = request.sampling.max_tokens
        if num_prompt + max_tokens > self.config.max_model_len:
            max_tokens = self.config.max_model_len - num_prompt
        sim_request = SimRequest(
            f"sim-{uuid.uuid4().hex[:16]}",
            num_prompt,
            max_tokens,
            self._block_hashes(prompt, request),
            arrival_s=self.now_s(),
            pooling=pooling,
        )
        answer, natural_end = text.answer(prompt.text, wrong="wrong_answer" in self.faults.active)
        ignore_eos = request.sampling.ignore_eos
        reasoning = 0
        if thinks and self.config.reasoning_share > 0 and text.thinks(request.extra):  # a reasoning model asked to
            reasoning = text.reasoning_tokens(self.config.reasoning_share, natural_end, max_tokens, ignore_eos)
            answer, natural_end = text.reasoning(prompt.text, reasoning) + answer, natural_end + reasoning
        stream = Stream(sim_request, answer, natural_end, ignore_eos, reasoning)
        self.streams[sim_request.request_id] = stream
        self.scheduler.add(sim_request)
        assert self._wake is not None
        self._wake.set()
        return stream

    def _block_hashes(self, prompt: Prompt, request: Request) -> list[int]:
        salt = request.extra.get("cache_salt")
        if request.model in self.config.lora_modules:  # vLLM keys a block by the adapter that computed it
            salt = f"{salt or ''}|lora:{request.model}"
        return text.block_hashes(prompt.tokens, self.config.block_size, salt)

    def prompt_blocks(self, route: Route, body: bytes, content_type: str) -> list[int]:
        """The chained hashes of the KV blocks a request's prompt would fill here (what a router's prefix
        match walks); [] for a pooling route's inputs or a body it would refuse."""
        if route.pooling:
            return []
        try:
            request = route.parse(body, content_type)
            return self._block_hashes(prompt_of(request, route.conversational, self.rules), request)
        except ValueError:
            return []

    def _abort(self, stream: Stream) -> None:
        self.streams.pop(stream.request.request_id, None)
        self.scheduler.abort(stream.request.request_id)
        if self._wake is not None:
            self._wake.set()

    # -- HTTP -----------------------------------------------------------------------------------------------
    async def health(self, request: HTTPRequest) -> Response:
        return Response(status_code=200)

    async def version(self, request: HTTPRequest) -> Response:
        return JSONResponse({"version": f"loadproof-sim {__version__}"})

    async def models(self, request: HTTPRequest) -> Response:
        base = {
            "id": self.config.model,
            "object": "model",
            "owned_by": "loadproof-sim",
            "max_model_len": self.config.max_model_len,
        }
        adapters = [dict(base, id=name, parent=self.config.model) for name in self.config.lora_modules]
        return JSONResponse({"object": "list", "data": [base, *adapters]})

    async def tokenize(self, request: HTTPRequest) -> Response:
        """vLLM's /tokenize: a prompt, or chat messages under the template (with their media's tokens)."""
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        try:
            if "messages" in body:
                typed = Request(route="", model="", messages=tuple(messages_of(body["messages"])))
                data = prompt_of(typed, True, self.rules).tokens
            else:
                data = str(body.get("prompt", "")).encode("utf-8")
        except (ValueError, AttributeError, TypeError) as exc:
            return _error(400, f"{exc}")
        return JSONResponse(
            {
                "count": len(data),
                "max_model_len": self.config.max_model_len,
                "tokens": list(data) if len(data) <= 65_536 else [],
            }
        )

    async def metrics(self, request: HTTPRequest) -> Response:
        return PlainTextResponse(
            render_metrics(self.config.model, self.scheduler, self.mm_cache), media_type="text/plain; version=0.0.4"
        )

    async def get_faults(self, request: HTTPRequest) -> Response:
        return JSONResponse(self.faults.model_dump())

    async def set_faults(self, request: HTTPRequest) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        try:
            faults = FaultConfig.model_validate(body)
        except Exception as exc:  # pydantic ValidationError: say which field
            return _error(400, f"bad fault setting: {exc}".splitlines()[0] + " " + str(exc).splitlines()[-1])
        self.faults = faults
        loop = asyncio.get_running_loop()
        if "crash" in faults.active and faults.after_requests <= self.num_requests:
            loop.call_later(0.05, os._exit, 13)
        if "refuse" in faults.active and faults.after_requests <= self.num_requests and self.on_refuse:
            loop.call_later(0.05, self.on_refuse)
        return JSONResponse(faults.model_dump())

    async def state(self, request: HTTPRequest) -> Response:
        s = self.scheduler
        return JSONResponse(
            {
                "running": [r.request_id for r in s.running],
                "waiting": [r.request_id for r in s.waiting],
                "num_free_blocks": s.pool.num_free,
                "num_gpu_blocks": s.pool.num_blocks,
                "resident_tokens": s.resident_tokens(),
                "now_s": self.now_s(),
                **s.gauges(),
            }
        )

    # -- the routes -----------------------------------------------------------------------------------------
    def _endpoint(self, route: Route) -> Handler:
        async def serve(http: HTTPRequest) -> Response:
            return await self.serve(route, http)

        return serve

    async def serve(self, route: Route, http: HTTPRequest) -> Response:
        """One request on `route`: read by its adapter, refused as vLLM refuses it, or served (a pooling model's
        routes by a pooling simulator, the others by a generating one; the other kind's are 404, as vLLM's)."""
        if route.pooling != (self.config.runner == "pooling"):
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        try:
            request = route.parse(await http.body(), http.headers.get("content-type", ""))
            prompts = (
                [prompt_of(Request(route="", model="", prompt=i), False, self.rules) for i in request.inputs]
                if route.pooling
                else [prompt_of(request, route.conversational, self.rules)]
            )
        except ValueError as exc:  # a BadRequest or a MediaError: what the body holds, or the model refuses
            return _error(400, str(exc), route=route)
        refused = self._refusal(route, request, max(prompts, key=lambda p: len(p.tokens)))
        if refused is not None:
            return refused
        for prompt in prompts:
            for digest in prompt.media:
                self.mm_cache.query(digest)
        if route.pooling:
            return await self._pool(route, http, request, prompts)
        return await self._generate(route, http, request, prompts[0])

    async def _pool(self, route: Route, http: HTTPRequest, request: Request, prompts: list[Prompt]) -> Response:
        """Each input a request of its own that prefills and ends (one step, as a generation of one token); the
        route's answer of their vectors (`text.embedding`, `embedding_dim` long)."""
        one = Request(route=request.route, model=request.model, sampling=Sampling(max_tokens=1, ignore_eos=True))
        streams = [self._submit(p, one, thinks=False, pooling=True) for p in prompts]
        collect: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*map(num_tokens, streams)))
        gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(http))
        try:
            await asyncio.wait({collect, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not collect.done():
                collect.cancel()
                for stream in streams:
                    self._abort(stream)
        if not collect.done():
            return Response(status_code=499)
        for stream in streams:
            self.streams.pop(stream.request.request_id, None)
        tokens = sum(s.request.prompt_tokens for s in streams)
        answer = Answer(uuid.uuid4().hex[:16], self.config.model, int(time.time()), tokens)
        dim = self.config.embedding_dim
        return JSONResponse(route.pooled(request, answer, lambda t: text.embedding(t, dim)))

    def _refusal(self, route: Route, request: Request, prompt: Prompt) -> Response | None:
        """A request's fault, unknown model or prompt too long, as vLLM answers them; None: serve it."""
        self.num_requests += 1
        fault = self._request_fault(route)
        if fault is not None:
            return fault
        if request.model not in ("", self.config.model, *self.config.lora_modules):
            return _error(404, f"The model `{request.model}` does not exist.", "NotFoundError", route)
        if len(prompt.tokens) >= self.config.max_model_len:
            return _error(
                400,
                f"This model's maximum context length is {self.config.max_model_len} tokens; "
                f"the prompt has {len(prompt.tokens)}",
                route=route,
            )
        return None

    async def _generate(self, route: Route, http: HTTPRequest, request: Request, prompt: Prompt) -> Response:
        stream = self._submit(prompt, request, thinks=route.conversational)
        answer = Answer(
            stream.request.request_id,
            self.config.model,
            int(time.time()),
            stream.request.prompt_tokens,
            reasoning_field=self.config.reasoning_field,
        )
        if request.stream:
            writer = route.writer(request, answer)
            return StreamingResponse(self._sse(stream, writer), media_type="text/event-stream")
        # a client that leaves before the whole answer aborts it, as with a stream (vLLM does both)
        collect = asyncio.ensure_future(num_tokens(stream))
        gone = asyncio.ensure_future(_disconnected(http))
        try:
            await asyncio.wait({collect, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            collect.cancel()
            self._abort(stream)
            raise
        finally:
            gone.cancel()
        if not collect.done():
            collect.cancel()
            self._abort(stream)
            return Response(status_code=499)
        n = collect.result()
        self.streams.pop(stream.request.request_id, None)
        stream.sync(answer, stream.request.num_output, last=True)
        return JSONResponse(route.whole(request, answer, *stream.whole(n)))

    def _request_fault(self, route: Route) -> Response | None:
        f = self.faults
        if self.num_requests <= f.after_requests:
            return None
        if "crash" in f.active:
            os._exit(13)
        if "http_500" in f.active:
            return _error(500, "simulated internal error", "InternalServerError", route)
        if "http_503" in f.active:
            return _error(503, "simulated overload", "ServiceUnavailable", route)
        if "refuse" in f.active and self.on_refuse:
            self.on_refuse()
        return None

    async def _sse(self, stream: Stream, writer: Writer) -> AsyncIterator[bytes]:
        """The stream's events as the route's writer shapes them: what it sends at once (a Responses stream's
        `response.created`), each token's events as the token comes (a chat stream's role chunk only with the
        first), and its end once the last token is out."""
        finished = False
        try:
            if opened := writer.open():
                yield opened
            last = False
            while not last:
                index, last = await stream.tokens.get()
                if index >= self.faults.after_tokens and "error_event" in self.faults.active:
                    yield writer.error(ERROR_MID_STREAM)
                    return
                if index >= self.faults.after_tokens and "drop" in self.faults.active:
                    raise DroppedConnection("simulated dropped connection")
                stream.sync(writer.answer, index + 1, last)
                yield writer.piece(stream.piece(index), index < stream.reasoning)
            finished = True
            yield writer.close()
        finally:
            if not finished:
                self._abort(stream)
            else:
                self.streams.pop(stream.request.request_id, None)


async def _disconnected(http: HTTPRequest) -> None:
    while (await http.receive())["type"] != "http.disconnect":
        pass


def _error(status: int, message: str, kind: str = "BadRequestError", route: Route | None = None) -> Response:
    """An error answer, in the route's shape where there is one (an Anthropic error on /v1/messages)."""
    body = (
        route.error(status, message, kind)
        if route is not None
        else {"error": {"message": message, "type": kind, "code": status}}
    )
    return JSONResponse(body, status_code=status)


async def _json_body(request: HTTPRequest) -> dict[str, Any] | Response:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "the body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    return body
