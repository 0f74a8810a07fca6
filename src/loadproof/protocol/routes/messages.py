"""`/v1/messages` (the Anthropic Messages API): `messages` of content blocks in, a stream of typed events out.

System messages go to the top-level `system`; a message's text and images as `text` and `image` blocks (the
image as a base64 `source`, never a URL), a tool use as a `tool_use` block, its result as a `tool_result`
block in a user message. Tools go as `{"name", "description", "input_schema"}`.

Read from the stream: `message_start` (the input tokens), `content_block_start` (a `tool_use` block's id and
name), `content_block_delta` (`text_delta`: answer; `thinking_delta`: reasoning; `input_json_delta`: a tool
call's arguments), `message_delta` (the stop reason and the output tokens), `message_stop` (the end); `error`
fails it. As with Responses, the usage comes at the start and the end, not per event.
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.request import Image, Message, Request, Text, ToolResult, ToolUse
from loadproof.protocol.routes.base import Route, decode_error, encoder
from loadproof.protocol.routes.reading import Reading

VERSION = "2023-06-01"
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


class Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class Block(msgspec.Struct):
    type: str = ""
    id: str | None = None
    name: str | None = None


class Delta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class Start(msgspec.Struct):
    usage: Usage | None = None


class Event(msgspec.Struct):
    type: str = ""
    index: int = 0
    message: Start | None = None
    content_block: Block | None = None
    delta: Delta | None = None
    usage: Usage | None = None
    error: Any = None


decoder = msgspec.json.Decoder(Event)


def block(part: Any) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        data = base64.b64encode(part.data).decode()
        return {"type": "image", "source": {"type": "base64", "media_type": part.mime, "data": data}}
    if isinstance(part, ToolUse):
        try:
            arguments = msgspec.json.decode(part.arguments) if part.arguments else {}
        except msgspec.DecodeError:
            arguments = {}
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": arguments}
    assert isinstance(part, ToolResult)
    return {"type": "tool_result", "tool_use_id": part.call_id, "content": part.text}


def anthropic_messages(messages: tuple[Message, ...]) -> tuple[str | None, list[dict[str, Any]]]:
    system = "\n".join(m.plain for m in messages if m.role == "system") or None
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"  # a tool's result comes in a user turn
        blocks = [block(p) for p in m.parts]
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({"role": role, "content": blocks[0]["text"]})
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    return {
        "name": fn.get("name", ""),
        "description": fn.get("description", ""),
        "input_schema": fn.get("parameters") or {"type": "object"},
    }


def anthropic_choice(choice: Any) -> dict[str, Any]:
    if isinstance(choice, dict):
        return {"type": "tool", "name": (choice.get("function") or {}).get("name", "")}
    return {"type": {"required": "any"}.get(str(choice), str(choice))}


class MessagesRoute(Route):
    name = "messages"
    path = "/v1/messages"
    media: ClassVar[frozenset[str]] = frozenset({"image"})
    done_payload = None
    prompt_usage = "input_tokens"
    forces_length: ClassVar[bool] = False
    constraints: ClassVar[frozenset[str]] = frozenset({"tools"})
    headers: ClassVar[dict[str, str]] = {"anthropic-version": VERSION}

    def encode(self, request: Request) -> bytes:
        messages = request.messages or (Message.text("user", request.prompt or ""),)
        system, convo = anthropic_messages(messages)
        s = request.sampling
        body: dict[str, Any] = {
            "model": request.model,
            "messages": convo,
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
        }
        if system is not None:
            body["system"] = system
        if request.stream:
            body["stream"] = True
        if request.tools:
            body["tools"] = [anthropic_tool(t) for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = anthropic_choice(request.tool_choice)
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
        if kind == "content_block_delta" and event.delta is not None:
            d = event.delta
            if d.type == "text_delta":
                reading.piece(now, d.text, None, False, 0)
            elif d.type == "thinking_delta":
                reading.piece(now, None, d.thinking, False, 0)
            elif d.type == "input_json_delta":
                reading.call(event.index, None, None, d.partial_json)
                reading.piece(now, None, None, True, 0)
        elif kind == "content_block_start" and event.content_block is not None:
            b = event.content_block
            if b.type == "tool_use":
                reading.call(event.index, b.id, b.name, None)
        elif kind == "message_start" and event.message is not None and event.message.usage is not None:
            u = event.message.usage
            reading.usage(u.input_tokens, None, u.cache_read_input_tokens)
        elif kind == "message_delta":
            if event.usage is not None:
                reading.usage(event.usage.input_tokens, event.usage.output_tokens, event.usage.cache_read_input_tokens)
            if event.delta is not None and event.delta.stop_reason is not None:
                reading.finish_reason = FINISH.get(event.delta.stop_reason, event.delta.stop_reason)
        elif kind == "message_stop":
            reading.done = True
        elif kind == "error":
            err = event.error
            raise StreamError(str(err.get("message") if isinstance(err, dict) else err or "error"))


ROUTE = MessagesRoute()
