"""The route adapters, one per API a target serves, in one registry (`loadproof.registry`).

`route_of(name)` is the adapter; `encode(request)` its body. A new route is one module here (or a plug-in's,
registered with `ROUTES.register(name, "module:ROUTE")`) and its section of docs/routes.md; the client, the
scenarios, the report, publish and verify ask the adapter and never the route's name
(tests/unit/protocol/test_routes.py).
"""

from __future__ import annotations

from typing import Any

from loadproof.protocol.request import Message, Request, Sampling
from loadproof.protocol.routes.base import Route
from loadproof.protocol.routes.chat import messages_of
from loadproof.registry import Registry

ROUTES: Registry[Route] = Registry.of(
    "route",
    {
        name: f"loadproof.protocol.routes.{name}:ROUTE"
        for name in ("completions", "chat", "responses", "messages", "embeddings", "rerank", "transcriptions")
    },
)


# the routes a scenario measures unless it says: text generated from a prompt or a conversation, with vLLM's
# `ignore_eos` where a scenario forces the answer's length
TEXT = ("completions", "chat")
# the APIs of text generation: throughput, sessions and replay measure each (load takes every route)
GENERATING = (*TEXT, "responses", "messages")


# the fields of a chat-shaped `extra` that the request types itself
_TYPED = ("messages", "tools", "tool_choice", "response_format")


def request_of(
    route: str,
    model: str,
    prompt: str = "",
    *,
    messages: list[Message] | list[dict[str, Any]] | None = None,
    inputs: list[str] | None = None,
    max_tokens: int = 16,
    temperature: float = 0.0,
    seed: int | None = None,
    ignore_eos: bool = False,
    stream: bool = True,
    extra: dict[str, Any] | None = None,
) -> Request:
    """A request from what a scenario holds: a prompt (one user message where the route carries messages)
    or a conversation (typed, or in the chat API's shape), and a chat-shaped `extra` whose tools and response
    format become typed fields."""
    rest = dict(extra or {})
    typed = {k: rest.pop(k) for k in _TYPED if k in rest}
    if messages is None and "messages" in typed:
        messages = typed["messages"]
    convo = tuple(messages_of(messages)) if messages is not None else ()
    return Request(
        route=route,
        model=model,
        messages=convo,
        prompt=None if convo else prompt,
        inputs=tuple(inputs) if inputs is not None else (prompt,),
        sampling=Sampling(max_tokens, temperature, seed, ignore_eos),
        stream=stream,
        tools=tuple(typed.get("tools") or ()),
        tool_choice=typed.get("tool_choice"),
        response_format=typed.get("response_format"),
        extra=rest,
    )


def route_of(name: str) -> Route:
    """The adapter of route `name` (UsageError naming the known routes for an unknown one)."""
    return ROUTES.get(name)


def route_names() -> list[str]:
    return ROUTES.in_order()


def encode(request: Request) -> bytes:
    return route_of(request.route).encode(request)


def request_body(
    route: str,
    model: str,
    prompt: str = "",
    *,
    max_tokens: int,
    temperature: float = 0.0,
    seed: int | None = None,
    stream: bool = True,
    ignore_eos: bool = False,
    messages: list[Any] | None = None,
    inputs: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """The encoded body of one request of a prompt (or a conversation, or a pooling route's inputs) on `route`."""
    request = request_of(
        route,
        model,
        prompt,
        messages=messages,
        inputs=inputs,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        ignore_eos=ignore_eos,
        stream=stream,
        extra=extra,
    )
    return encode(request)


__all__ = [
    "GENERATING",
    "ROUTES",
    "TEXT",
    "Request",
    "Route",
    "encode",
    "request_body",
    "request_of",
    "route_names",
    "route_of",
]
