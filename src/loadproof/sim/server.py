"""`loadproof sim`: the simulator as an OpenAI-compatible HTTP server on a scaled real-time clock.

One asyncio task drives the scheduler: it schedules a step, sleeps the step's modeled duration divided
by `time_scale`, completes the step and hands each sampled token to its request's stream. Endpoints:
/v1/completions and /v1/chat/completions (streaming or not, the chunks shaped as vLLM 0.32's: `sim.stream`), or,
as a pooling model (`runner = "pooling"`), /v1/embeddings and /v1/rerank,
/tokenize, /v1/models, /version, /health, /metrics (vLLM's names; durations in the wall seconds its clients
measure, whatever the time scale), and the control endpoint
/sim/faults (GET, POST) with /sim/state for tests. A client that disconnects aborts its request, which
frees its blocks before the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from loadproof import __version__
from loadproof.protocol.sse import DONE_EVENT, encode_data
from loadproof.sim import pooling, text
from loadproof.sim.config import FaultConfig, SimConfig
from loadproof.sim.metrics import render_metrics
from loadproof.sim.scheduler import Scheduler, SimRequest
from loadproof.sim.stream import Chunks, Stream, num_tokens, usage

_ERROR_EVENT = encode_data(
    b'{"error":{"message":"simulated engine error mid-stream","type":"InternalServerError","code":500}}'
)


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
        self._wake: asyncio.Event | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._t0 = time.perf_counter()
        self.on_refuse: Any = None  # set by the runner: closes the listening sockets
        self.app = Starlette(
            routes=[
                Route("/health", self.health),
                Route("/version", self.version),
                Route("/v1/models", self.models),
                Route("/tokenize", self.tokenize, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
                Route("/v1/rerank", self.rerank, methods=["POST"]),
                Route("/metrics", self.metrics),
                Route("/sim/faults", self.get_faults, methods=["GET"]),
                Route("/sim/faults", self.set_faults, methods=["POST"]),
                Route("/sim/state", self.state),
            ],
            lifespan=self._lifespan,
        )

    # -- the engine loop --------------------------------------------------------------------------------
    def now_s(self) -> float:
        """Modeled seconds since start."""
        return (time.perf_counter() - self._t0) * self.config.time_scale

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
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

    def _submit(self, prompt: str, body: dict[str, Any], chat: bool, pooling: bool = False) -> Stream:
        prompt_bytes = prompt.encode("utf-8")
        num_prompt = len(prompt_bytes)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if num_prompt + max_tokens > self.config.max_model_len:
            max_tokens = self.config.max_model_len - num_prompt
        salt = body.get("cache_salt")
        if body.get("model") in self.config.lora_modules:  # vLLM keys a block by the adapter that computed it
            salt = f"{salt or ''}|lora:{body['model']}"
        request = SimRequest(
            f"sim-{uuid.uuid4().hex[:16]}",
            num_prompt,
            max_tokens,
            text.block_hashes(prompt_bytes, self.config.block_size, salt),
            arrival_s=self.now_s(),
            pooling=pooling,
        )
        answer, natural_end = text.answer(prompt, wrong="wrong_answer" in self.faults.active)
        ignore_eos = bool(body.get("ignore_eos"))
        reasoning = 0
        if chat and self.config.reasoning_share > 0 and text.thinks(body):  # a reasoning model asked to think
            reasoning = text.reasoning_tokens(self.config.reasoning_share, natural_end, max_tokens, ignore_eos)
            answer, natural_end = text.reasoning(prompt, reasoning) + answer, natural_end + reasoning
        stream = Stream(request, answer, natural_end, ignore_eos, reasoning)
        self.streams[request.request_id] = stream
        self.scheduler.add(request)
        assert self._wake is not None
        self._wake.set()
        return stream

    def _abort(self, stream: Stream) -> None:
        self.streams.pop(stream.request.request_id, None)
        self.scheduler.abort(stream.request.request_id)
        if self._wake is not None:
            self._wake.set()

    # -- HTTP -----------------------------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        return Response(status_code=200)

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": f"loadproof-sim {__version__}"})

    async def models(self, request: Request) -> Response:
        base = {
            "id": self.config.model,
            "object": "model",
            "owned_by": "loadproof-sim",
            "max_model_len": self.config.max_model_len,
        }
        adapters = [dict(base, id=name, parent=self.config.model) for name in self.config.lora_modules]
        return JSONResponse({"object": "list", "data": [base, *adapters]})

    async def tokenize(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        prompt = text.chat_prompt(body["messages"]) if "messages" in body else str(body.get("prompt", ""))
        data = prompt.encode("utf-8")
        return JSONResponse(
            {
                "count": len(data),
                "max_model_len": self.config.max_model_len,
                "tokens": list(data) if len(data) <= 65_536 else [],
            }
        )

    async def metrics(self, request: Request) -> Response:
        return PlainTextResponse(
            render_metrics(self.config.model, self.scheduler), media_type="text/plain; version=0.0.4"
        )

    async def get_faults(self, request: Request) -> Response:
        return JSONResponse(self.faults.model_dump())

    async def set_faults(self, request: Request) -> Response:
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

    async def state(self, request: Request) -> Response:
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

    async def completions(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt and isinstance(prompt[0], str) else None
        if not isinstance(prompt, str):
            return _error(400, "prompt must be a string")
        return await self._generate(request, body, prompt, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list")
        return await self._generate(request, body, text.chat_prompt(messages), chat=True)

    async def embeddings(self, request: Request) -> Response:
        """A pooling model's /v1/embeddings: each input is a request of its own that prefills and ends (one
        step, as a generation of one token), and gets a vector of `embedding_dim` from its text."""
        if self.config.runner != "pooling":
            return JSONResponse({"detail": "Not Found"}, status_code=404)  # vLLM 0.32 serves no such route
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        inputs = pooling.embedding_inputs(body)
        if inputs is None:
            return _error(400, "input must be a string or a non-empty list of strings")
        tokens = await self._pool(request, body, inputs)
        if isinstance(tokens, Response):
            return tokens
        return JSONResponse(pooling.embeddings(self.config.model, self.config.embedding_dim, inputs, tokens))

    async def rerank(self, request: Request) -> Response:
        """A pooling model's /v1/rerank: the query and each document embedded (as /v1/embeddings) and scored."""
        if self.config.runner != "pooling":
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        asked = pooling.rerank_inputs(body)
        if asked is None:
            return _error(400, "query must be a string and documents a string or a non-empty list of strings")
        query, documents = asked
        tokens = await self._pool(request, body, [query, *documents])
        if isinstance(tokens, Response):
            return tokens
        return JSONResponse(pooling.rerank(self.config.model, self.config.embedding_dim, query, documents, tokens))

    async def _pool(self, request: Request, body: dict[str, Any], inputs: list[str]) -> int | Response:
        """Each input a request of its own that prefills and ends; their prompt tokens, or the refusal."""
        refused = self._refusal(body, max(inputs, key=text.count_tokens))
        if refused is not None:
            return refused
        streams = [self._submit(i, {"max_tokens": 1, "ignore_eos": True}, chat=False, pooling=True) for i in inputs]
        collect: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*map(num_tokens, streams)))
        gone: asyncio.Future[Any] = asyncio.ensure_future(_disconnected(request))
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
        return sum(s.request.prompt_tokens for s in streams)

    def _refusal(self, body: dict[str, Any], prompt: str) -> Response | None:
        """A request's fault, unknown model or prompt too long, as vLLM answers them; None: serve it."""
        self.num_requests += 1
        fault = self._request_fault()
        if fault is not None:
            return fault
        if body.get("model") not in (None, self.config.model, *self.config.lora_modules):
            return _error(404, f"The model `{body.get('model')}` does not exist.")
        if text.count_tokens(prompt) >= self.config.max_model_len:
            return _error(
                400,
                f"This model's maximum context length is {self.config.max_model_len} tokens; "
                f"the prompt has {text.count_tokens(prompt)}",
            )
        return None

    async def _generate(self, http: Request, body: dict[str, Any], prompt: str, chat: bool) -> Response:
        if self.config.runner == "pooling":
            return JSONResponse({"detail": "Not Found"}, status_code=404)  # as vLLM 0.32's pooling server
        refused = self._refusal(body, prompt)
        if refused is not None:
            return refused
        stream = self._submit(prompt, body, chat)
        created = int(time.time())
        if body.get("stream"):
            chunks = Chunks.of(
                stream, self.config.model, created, chat, self.config.reasoning_field, body.get("stream_options")
            )
            return StreamingResponse(self._sse(chunks), media_type="text/event-stream")
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
        content = stream.text[:n] if n <= len(stream.text) else stream.text
        choice: dict[str, Any] = {"index": 0, "finish_reason": stream.request.finish_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": content[stream.reasoning :]}
            if stream.reasoning:
                choice["message"][self.config.reasoning_field] = content[: stream.reasoning]
        else:
            choice["text"] = content
        return JSONResponse(
            {
                "id": stream.request.request_id,
                "object": "chat.completion" if chat else "text_completion",
                "created": created,
                "model": self.config.model,
                "choices": [choice],
                "usage": usage(stream.request),
            }
        )

    def _request_fault(self) -> Response | None:
        f = self.faults
        if self.num_requests <= f.after_requests:
            return None
        if "crash" in f.active:
            os._exit(13)
        if "http_500" in f.active:
            return _error(500, "simulated internal error", "InternalServerError")
        if "http_503" in f.active:
            return _error(503, "simulated overload", "ServiceUnavailable")
        if "refuse" in f.active and self.on_refuse:
            self.on_refuse()
        return None

    async def _sse(self, chunks: Chunks) -> AsyncIterator[bytes]:
        """The stream's events as vLLM 0.32 sends them (`sim.stream`): the first only once the first token is
        there (chat: its role chunk, then the token's), the finish reason on the last token's chunk."""
        stream = chunks.stream
        finished = False
        try:
            first, last = True, False
            while not last:
                index, last = await stream.tokens.get()
                if index >= self.faults.after_tokens and "error_event" in self.faults.active:
                    yield _ERROR_EVENT
                    return
                if index >= self.faults.after_tokens and "drop" in self.faults.active:
                    raise DroppedConnection("simulated dropped connection")
                if first and (role := chunks.role()) is not None:
                    yield role
                first = False
                yield chunks.token(index, last)
            finished = True
            if (final := chunks.final_usage()) is not None:
                yield final
            yield DONE_EVENT
        finally:
            if not finished:
                self._abort(stream)
            else:
                self.streams.pop(stream.request.request_id, None)


async def _disconnected(http: Request) -> None:
    while (await http.receive())["type"] != "http.disconnect":
        pass


def _error(status: int, message: str, kind: str = "BadRequestError") -> Response:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any] | Response:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "the body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "the body must be a JSON object")
    return body
