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

Served (`EventWriter`) as vLLM 0.32's `responses/serving.py` streams: `response.created` and
`response.in_progress` at once (before the prefill), then for each output item (reasoning, then the message)
`response.output_item.added` and `response.content_part.added` with its first token,
`response.reasoning_text.delta` or `response.output_text.delta` a token, its `.done`, `content_part.done` and
`output_item.done` events, and `response.completed` with the usage (`input_tokens`, `output_tokens`,
`input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`); a response cut at its budget
is `status: incomplete` with `incomplete_details.reason: max_output_tokens`, still in `response.completed`.
Each event is `event: TYPE` and its `data:`, numbered by `sequence_number`; no `[DONE]`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.media import from_data_url, image_of
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
        if content and all(c["type"] in ("input_text", "output_text") for c in content):
            # text alone goes as a string: vLLM takes an assistant's earlier turn only so (a list of output_text
            # parts must be a whole output message, with its id and status)
            items.append({"role": m.role, "content": "".join(c["text"] for c in content)})
        elif content:
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
    probed = True
    end_events: ClassVar[frozenset[str]] = frozenset({"response.completed", "response.incomplete", "response.failed"})
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

    def parse(self, body: bytes, content_type: str) -> Request:
        data = json_object(body)
        items = data.pop("input", None)
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
            raise BadRequest("input must be a string or a non-empty list of items")
        messages = [Message.text("system", str(data.pop("instructions")))] if data.get("instructions") else []
        messages += [message_of(i) for i in items]
        model = model_of(data)
        sampling = pop_sampling(data, "max_output_tokens")
        stream = pop_stream(data)
        if data.get("store") is False:
            del data["store"]  # encode's own
        choice = data.pop("tool_choice", None)
        text = data.pop("text", None)
        return Request(
            route=self.name,
            model=model,
            messages=tuple(messages),
            sampling=sampling,
            stream=stream,
            tools=tuple(chat_tool(t) for t in data.pop("tools", None) or ()),
            tool_choice=chat_tool(choice) if isinstance(choice, dict) else choice,
            response_format=response_format(text) if isinstance(text, dict) else None,
            extra=data,
        )

    def writer(self, request: Request, answer: Answer) -> Writer:
        return EventWriter(request, answer)

    def whole(self, request: Request, answer: Answer, text: str, reasoning: str) -> dict[str, Any]:
        w = EventWriter(request, answer)
        output = []
        if reasoning:
            output.append(w.item("reasoning", reasoning, "completed"))
        output.append(w.item("message", text, "completed"))
        return w.response(output)

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


def message_of(item: dict[str, Any]) -> Message:
    """One input item as a typed message: a role's content (text and images), a `function_call` (the
    assistant's tool use) or a `function_call_output` (the tool's result)."""
    kind = item.get("type")
    if kind == "function_call":
        use = ToolUse(str(item.get("call_id", "")), str(item.get("name", "")), str(item.get("arguments", "")))
        return Message("assistant", (use,))
    if kind == "function_call_output":
        return Message("tool", (ToolResult(str(item.get("call_id", "")), str(item.get("output", ""))),))
    role = item.get("role")
    if role not in ("system", "user", "assistant", "developer"):
        raise BadRequest(f"an input item of role {role!r} and type {kind!r}")
    content = item.get("content")
    parts: list[Part] = []
    if isinstance(content, str):
        parts.append(Text(content))
    elif isinstance(content, list):
        for p in content:
            p = p if isinstance(p, dict) else {}
            if p.get("type") in ("input_text", "output_text"):
                parts.append(Text(str(p.get("text", ""))))
            elif p.get("type") == "input_image":
                mime, data = from_data_url(str(p.get("image_url", "")))
                parts.append(image_of(data, mime))
            else:
                raise BadRequest(f"a content part of type {p.get('type')!r} (input_text, output_text, input_image)")
    final: Role = "system" if role == "developer" else role
    return Message(final, tuple(parts))


def chat_tool(tool: Any) -> dict[str, Any]:
    """A flat tool (or tool choice) in the chat API's shape, as the typed request keeps it."""
    if not isinstance(tool, dict):
        raise BadRequest("a tool must be an object")
    function = {k: v for k, v in tool.items() if k in ("name", "description", "parameters")}
    return {"type": tool.get("type", "function"), "function": function}


def response_format(text: dict[str, Any]) -> dict[str, Any] | None:
    fmt = text.get("format")
    if not isinstance(fmt, dict):
        return None
    kind = fmt.get("type", "text")
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}
    return {"type": kind}


class EventWriter(Writer):
    """A Responses stream, as vLLM's simple (non-harmony) streaming processor sends it."""

    def __init__(self, request: Request, answer: Answer) -> None:
        super().__init__(request, answer)
        self.sequence = 0
        self.output: list[dict[str, Any]] = []  # the items done so far
        self.kind: str | None = None  # the open item: "reasoning" or "message"
        self.text = ""

    def event(self, kind: str, **fields: Any) -> bytes:
        out = event(kind, {"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return out

    def response(self, output: list[dict[str, Any]]) -> dict[str, Any]:
        a = self.answer
        incomplete = a.finish_reason == "length"
        done = a.finish_reason is not None
        status = "incomplete" if incomplete else "completed" if done else "in_progress"
        usage = None
        if done:
            usage = {
                "input_tokens": a.prompt_tokens,
                "input_tokens_details": {"cached_tokens": a.cached_tokens or 0},
                "output_tokens": a.output_tokens,
                "output_tokens_details": {"reasoning_tokens": a.reasoning_tokens},
                "total_tokens": a.prompt_tokens + a.output_tokens,
            }
        return {
            "id": f"resp_{a.id}",
            "created_at": a.created,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "model": a.model,
            "object": "response",
            "output": output,
            "status": status,
            "usage": usage,
        }

    def item(self, kind: str, text: str, status: str) -> dict[str, Any]:
        index = len(self.output)
        if kind == "reasoning":
            content = [{"text": text, "type": "reasoning_text"}] if status == "completed" else []
            return {"id": f"rs_{self.answer.id}_{index}", "summary": [], "type": "reasoning", "content": content}
        part = [{"type": "output_text", "text": text, "annotations": []}] if text and status == "completed" else []
        return {
            "id": f"msg_{self.answer.id}_{index}",
            "content": part,
            "role": "assistant",
            "status": status,
            "type": "message",
        }

    def open(self) -> bytes:
        response = self.response([])
        return self.event("response.created", response=response) + self.event("response.in_progress", response=response)

    def piece(self, text: str, reasoning: bool) -> bytes:
        kind = "reasoning" if reasoning else "message"
        out = b""
        if self.kind != kind:
            out += self._done()
            self.kind, self.text = kind, ""
            index = len(self.output)
            item = self.item(kind, "", "in_progress")
            out += self.event("response.output_item.added", output_index=index, item=item)
            part = {"text": "", "type": "reasoning_text"} if reasoning else {"type": "output_text", "text": ""}
            out += self.event(
                "response.content_part.added", output_index=index, item_id=item["id"], content_index=0, part=part
            )
        self.text += text
        delta = "response.reasoning_text.delta" if reasoning else "response.output_text.delta"
        item_id = self.item(kind, "", "in_progress")["id"]
        return out + self.event(delta, output_index=len(self.output), item_id=item_id, content_index=0, delta=text)

    def _done(self) -> bytes:
        if self.kind is None:
            return b""
        index = len(self.output)
        item = self.item(self.kind, self.text, "completed")
        text = "response.reasoning_text.done" if self.kind == "reasoning" else "response.output_text.done"
        out = self.event(text, output_index=index, item_id=item["id"], content_index=0, text=self.text)
        part = item["content"][0] if item["content"] else {"type": "output_text", "text": ""}
        out += self.event(
            "response.content_part.done", output_index=index, item_id=item["id"], content_index=0, part=part
        )
        out += self.event("response.output_item.done", output_index=index, item=item)
        self.output.append(item)
        self.kind = None
        return out

    def close(self) -> bytes:
        out = self._done()
        return out + self.event("response.completed", response=self.response(self.output))

    def error(self, message: str) -> bytes:
        return self.event("error", code="internal_error", message=message, param=None)


ROUTE = ResponsesRoute()
