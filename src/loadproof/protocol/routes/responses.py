"""`/v1/responses` (the OpenAI Responses API): `input` items in, a stream of typed events out.

The conversation is sent whole as input items (no `previous_response_id`, and `store` off: the engine keeps
nothing between turns): a message's text and images as `input_text`/`input_image` parts (`output_text` for
an assistant's), a tool use as a `function_call` item, its result as `function_call_output`. Tools go flat
(`{"type": "function", "name", "parameters"}`), a JSON schema under `text.format`.

Read from the stream: `response.output_text.delta` (answer), `response.reasoning_text.delta` and
`response.reasoning_summary_text.delta` (reasoning), `response.output_item.added` (a function call's id and
name) and `response.function_call_arguments.delta` (its arguments); `response.completed` or
`response.incomplete` ends it with the usage (`input_tokens`, `output_tokens`, their details); `error` and
`response.failed` fail it. The usage comes once, at the end: each event's tokens are not known
(`chunk_usage` false), as vLLM streams one event per engine step.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.request import Image, Message, Request, Text, ToolResult, ToolUse
from loadproof.protocol.routes.base import Route, decode_error, encoder
from loadproof.protocol.routes.reading import Reading


class Details(msgspec.Struct):
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


class Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_tokens_details: Details | None = None
    output_tokens_details: Details | None = None


class Incomplete(msgspec.Struct):
    reason: str | None = None


class Response(msgspec.Struct):
    status: str | None = None
    usage: Usage | None = None
    incomplete_details: Incomplete | None = None
    error: Any = None


class Item(msgspec.Struct):
    type: str = ""
    call_id: str | None = None
    name: str | None = None


class Event(msgspec.Struct):
    type: str = ""
    delta: str | None = None
    output_index: int = 0
    item: Item | None = None
    response: Response | None = None
    message: str | None = None
    error: Any = None


decoder = msgspec.json.Decoder(Event)
# why an incomplete response stopped, in the chat API's finish reasons
FINISH = {"max_output_tokens": "length", "content_filter": "content_filter"}


def input_items(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for m in messages:
        content: list[dict[str, Any]] = []
        for p in m.parts:
            if isinstance(p, Text):
                kind = "output_text" if m.role == "assistant" else "input_text"
                content.append({"type": kind, "text": p.text})
            elif isinstance(p, Image):
                content.append({"type": "input_image", "image_url": p.data_url(), "detail": "auto"})
            elif isinstance(p, ToolUse):
                items.append({"type": "function_call", "call_id": p.id, "name": p.name, "arguments": p.arguments})
            elif isinstance(p, ToolResult):
                items.append({"type": "function_call_output", "call_id": p.call_id, "output": p.text})
        if content:
            items.append({"role": m.role, "content": content})
    return items


def flat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    return {"type": "function", **{k: v for k, v in fn.items() if k in ("name", "description", "parameters")}}


def text_format(response_format: dict[str, Any]) -> dict[str, Any]:
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema") or {}
        return {"format": {"type": "json_schema", **schema}}
    return {"format": {"type": response_format.get("type", "text")}}


class ResponsesRoute(Route):
    name = "responses"
    path = "/v1/responses"
    media: ClassVar[frozenset[str]] = frozenset({"image"})
    done_payload = None
    prompt_usage = "input_tokens"
    forces_length: ClassVar[bool] = False
    constraints: ClassVar[frozenset[str]] = frozenset({"tools", "response_format"})

    def encode(self, request: Request) -> bytes:
        messages = request.messages or (Message.text("user", request.prompt or ""),)
        s = request.sampling
        body: dict[str, Any] = {
            "model": request.model,
            "input": input_items(messages),
            "max_output_tokens": s.max_tokens,
            "temperature": s.temperature,
            "store": False,
        }
        if request.stream:
            body["stream"] = True
        if request.tools:
            body["tools"] = [flat_tool(t) for t in request.tools]
        if request.tool_choice is not None:
            choice = request.tool_choice
            body["tool_choice"] = flat_tool(choice) if isinstance(choice, dict) else choice
        if request.response_format is not None:
            body["text"] = text_format(request.response_format)
        body.update(request.extra)
        return encoder.encode(body)

    def feed(self, reading: Reading, payload: bytes, now: int) -> None:
        try:
            event = decoder.decode(payload)
        except msgspec.DecodeError as exc:
            raise decode_error(exc) from None
        kind = event.type
        reading.num_events += 1
        reading.per_event_usage = False
        if kind == "response.output_text.delta":
            reading.piece(now, event.delta, None, False, 0)
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            reading.piece(now, None, event.delta, False, 0)
        elif kind == "response.output_item.added" and event.item is not None and event.item.type == "function_call":
            reading.call(event.output_index, event.item.call_id, event.item.name, None)
        elif kind == "response.function_call_arguments.delta":
            reading.call(event.output_index, None, None, event.delta)
            reading.piece(now, None, None, True, 0)
        elif kind in ("response.completed", "response.incomplete"):
            self._end(reading, event.response)
        elif kind in ("error", "response.failed"):
            err = event.error if event.error is not None else (event.response.error if event.response else None)
            message = event.message or (err.get("message") if isinstance(err, dict) else err)
            raise StreamError(str(message or kind))

    @staticmethod
    def _end(reading: Reading, response: Response | None) -> None:
        reading.done = True
        if response is None:
            return
        usage = response.usage
        if usage is not None:
            cached = usage.input_tokens_details.cached_tokens if usage.input_tokens_details else None
            reasoning = usage.output_tokens_details.reasoning_tokens if usage.output_tokens_details else None
            reading.usage(usage.input_tokens, usage.output_tokens, cached, reasoning)
        if response.status == "completed":
            reading.finish_reason = "tool_calls" if reading.calls else "stop"
        elif response.incomplete_details is not None:
            reading.finish_reason = FINISH.get(response.incomplete_details.reason or "", "length")


ROUTE = ResponsesRoute()
