"""`/v1/messages` (the Anthropic Messages API): `messages` of content blocks in, a stream of typed events out.

System messages go to the top-level `system`; a message's text and images as `text` and `image` blocks (the
image as a base64 `source`, never a URL), a tool use as a `tool_use` block, its result as a `tool_result`
block in a user message. Tools go as `{"name", "description", "input_schema"}`.

Read from the stream: `message_start` (the input tokens), `content_block_start` (a `tool_use` block's id and
name), `content_block_delta` (`text_delta`: answer; `thinking_delta`: reasoning; `input_json_delta`: a tool
call's arguments), `message_delta` (the stop reason and the output tokens), `message_stop` (the end); `error`
fails it. As with Responses, the usage comes at the start and the end, not per event. An Anthropic usage's
`input_tokens` leaves out the prompt's cached part (`cache_read_input_tokens`) and the part written to the
cache (`cache_creation_input_tokens`): the prompt's tokens are their sum.

Served (`EventWriter`) as vLLM 0.32's `anthropic/serving.py` turns its chat stream into events: `message_start`
(its usage's `input_tokens` the prompt's, `output_tokens` 0) with the first token, then a block a kind
(`content_block_start`; `content_block_delta` a token, `thinking_delta` or `text_delta`; a thinking block closed
by its `signature_delta`; `content_block_stop`), `message_delta` with the stop reason and the usage, and
`message_stop`; each event is `event: TYPE` and its `data:`.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any, ClassVar

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.media import decode_base64, image_of
from loadproof.protocol.request import Image, Message, Part, Request, Role, Text, ToolResult, ToolUse
from loadproof.protocol.routes.base import (
    Answer,
    BadRequest,
    Route,
    Writer,
    decode_error,
    encoder,
    event,
    json_object,
    model_of,
    pop_sampling,
    pop_stream,
)
from loadproof.protocol.routes.reading import Reading

VERSION = "2023-06-01"
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}  # as vLLM maps its finish reasons
ERRORS = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 503: "overloaded_error"}


class Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None

    @property
    def prompt(self) -> int | None:
        """The prompt's tokens: the uncached input, the cached and the written-to-cache parts together."""
        if self.input_tokens is None:
            return None
        return self.input_tokens + (self.cache_read_input_tokens or 0) + (self.cache_creation_input_tokens or 0)


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
    probed = True
    end_events: ClassVar[frozenset[str]] = frozenset({"message_stop"})
    prompt_usage = "input_tokens"
    forces_length: ClassVar[bool] = False
    constraints: ClassVar[frozenset[str]] = frozenset({"tools"})
    headers: ClassVar[dict[str, str]] = {"anthropic-version": VERSION}

    def prompt_tokens_of(self, answer: Any) -> int:
        """The uncached input and the cached and written-to-cache parts together, as the stream reads them."""
        prompt = msgspec.convert(answer["usage"], Usage).prompt
        if prompt is None:
            raise KeyError("input_tokens")
        return prompt

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
            reading.usage(u.prompt, None, u.cache_read_input_tokens)
        elif kind == "message_delta":
            if event.usage is not None:
                u = event.usage
                reading.usage(u.prompt, u.output_tokens, u.cache_read_input_tokens)
            if event.delta is not None and event.delta.stop_reason is not None:
                reading.finish_reason = FINISH.get(event.delta.stop_reason, event.delta.stop_reason)
        elif kind == "message_stop":
            reading.done = True
        elif kind == "error":
            err = event.error
            raise StreamError(str(err.get("message") if isinstance(err, dict) else err or "error"))

    def parse(self, body: bytes, content_type: str) -> Request:
        data = json_object(body)
        convo = data.pop("messages", None)
        if not isinstance(convo, list) or not convo or not all(isinstance(m, dict) for m in convo):
            raise BadRequest("messages must be a non-empty list of objects")
        system = data.pop("system", None)
        messages = [Message("system", tuple(parts_of(system)))] if system else []
        for m in convo:
            parts = parts_of(m.get("content"))
            tool = bool(parts) and all(isinstance(p, ToolResult) for p in parts)
            role: Role = "assistant" if m.get("role") == "assistant" else "tool" if tool else "user"
            messages.append(Message(role, tuple(parts)))
        model = model_of(data)
        sampling = pop_sampling(data, "max_tokens")
        stream = pop_stream(data)
        choice = data.pop("tool_choice", None)
        return Request(
            route=self.name,
            model=model,
            messages=tuple(messages),
            sampling=sampling,
            stream=stream,
            tools=tuple(chat_tool(t) for t in data.pop("tools", None) or ()),
            tool_choice=chat_choice(choice) if choice is not None else None,
            extra=data,
        )

    def writer(self, request: Request, answer: Answer) -> Writer:
        return EventWriter(request, answer)

    def whole(self, request: Request, answer: Answer, text: str, reasoning: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "signature": uuid.uuid4().hex})
        content.append({"type": "text", "text": text})
        return message_of(answer, content, STOP.get(answer.finish_reason or "", "end_turn"), usage_of(answer))

    def error(self, status: int, message: str, kind: str = "BadRequestError") -> dict[str, Any]:
        return {"type": "error", "error": {"type": ERRORS.get(status, "api_error"), "message": message}}


def parts_of(content: Any) -> list[Part]:
    """A message's content (a string, or blocks: text, a base64 image, tool_use, tool_result) as typed parts."""
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        raise BadRequest("a message's content must be a string or a list of blocks")
    parts: list[Part] = []
    for b in content:
        b = b if isinstance(b, dict) else {}
        kind = b.get("type")
        if kind == "text":
            parts.append(Text(str(b.get("text", ""))))
        elif kind == "image":
            source = b.get("source") or {}
            if source.get("type") != "base64":
                raise BadRequest("an image block's source must be base64 (loadproof never fetches a URL)")
            parts.append(image_of(decode_base64(str(source.get("data", ""))), str(source.get("media_type", ""))))
        elif kind == "tool_use":
            arguments = msgspec.json.encode(b.get("input") or {}).decode()
            parts.append(ToolUse(str(b.get("id", "")), str(b.get("name", "")), arguments))
        elif kind == "tool_result":
            result = b.get("content")
            if isinstance(result, list):
                result = "".join(str(r.get("text", "")) for r in result if isinstance(r, dict))
            parts.append(ToolResult(str(b.get("tool_use_id", "")), "" if result is None else str(result)))
        else:
            raise BadRequest(f"a content block of type {kind!r} (text, image, tool_use, tool_result)")
    return parts


def chat_tool(tool: Any) -> dict[str, Any]:
    if not isinstance(tool, dict):
        raise BadRequest("a tool must be an object")
    fn = {"name": tool.get("name", ""), "description": tool.get("description", "")}
    return {"type": "function", "function": {**fn, "parameters": tool.get("input_schema") or {"type": "object"}}}


def chat_choice(choice: Any) -> Any:
    kind = choice.get("type") if isinstance(choice, dict) else choice
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name", "")}}
    return {"any": "required"}.get(str(kind), str(kind))


def usage_of(answer: Answer, output: int | None = None) -> dict[str, Any]:
    """An Anthropic usage, as vLLM builds it from the chat usage: the cached part apart where it is known."""
    cached = answer.cached_tokens if output is None else None
    usage: dict[str, Any] = {"input_tokens": answer.prompt_tokens - (cached or 0)}
    usage["output_tokens"] = answer.output_tokens if output is None else output
    if cached is not None:
        usage["cache_read_input_tokens"] = cached
    return usage


def message_of(
    answer: Answer, content: list[dict[str, Any]], stop: str | None, usage: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": answer.id,
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": answer.model,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


class EventWriter(Writer):
    def __init__(self, request: Request, answer: Answer) -> None:
        super().__init__(request, answer)
        self.index = 0
        self.block: str | None = None  # the open block: "thinking" or "text"
        self.started = False

    def piece(self, text: str, reasoning: bool) -> bytes:
        out = b""
        if not self.started:
            self.started = True
            start = message_of(self.answer, [], None, usage_of(self.answer, 0))
            out += event("message_start", {"type": "message_start", "message": start})
        kind = "thinking" if reasoning else "text"
        if self.block != kind:
            out += self._stop()
            self.block = kind
            block = {"type": kind, kind: ""}
            out += event(
                "content_block_start", {"type": "content_block_start", "content_block": block, "index": self.index}
            )
        delta = {"type": f"{kind}_delta", kind: text}
        return out + event("content_block_delta", {"type": "content_block_delta", "delta": delta, "index": self.index})

    def _stop(self) -> bytes:
        if self.block is None:
            return b""
        out = b""
        if self.block == "thinking":
            signature = {"type": "signature_delta", "signature": uuid.uuid4().hex}
            out += event(
                "content_block_delta", {"type": "content_block_delta", "delta": signature, "index": self.index}
            )
        out += event("content_block_stop", {"type": "content_block_stop", "index": self.index})
        self.block = None
        self.index += 1
        return out

    def close(self) -> bytes:
        out = self._stop()
        stop = {"stop_reason": STOP.get(self.answer.finish_reason or "", "end_turn"), "stop_sequence": None}
        out += event("message_delta", {"type": "message_delta", "delta": stop, "usage": usage_of(self.answer)})
        return out + event("message_stop", {"type": "message_stop"})

    def error(self, message: str) -> bytes:
        return event("error", {"type": "error", "error": {"type": "internal_error", "message": message}})


ROUTE = MessagesRoute()
