"""`/v1/chat/completions`: messages in, a stream of `choices[].delta` chunks out.

The content of a message is a string when it is one text part, else a list of parts: `text`, `image_url`
(a data URL: never a URL the engine would fetch), `input_audio` (base64 WAV) and `video_url` (the frames as
`data:video/jpeg;base64,F1,F2,...`, which vLLM decodes frame by frame). An assistant's tool uses are its
`tool_calls`; a tool result is a `tool` message. Streams ask for usage on every chunk
(`continuous_usage_stats`), so each chunk's tokens are known; reasoning comes under `reasoning` (vLLM since
0.10) or `reasoning_content` (older vLLM, SGLang).

Served (`ChunkWriter`, the simulator's streams) as vLLM 0.32's `chat_completion/serving.py` sends them: nothing
before the first token, then the role chunk (`delta: {"role": "assistant", "content": ""}`) right before its
chunk; one chunk a token, `finish_reason` (with `stop_reason`) on the last token's chunk; with
`stream_options.include_usage` a final chunk with no choices carries the usage, and with
`continuous_usage_stats` as well every chunk carries the counts so far (the role chunk 0 completion tokens).
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.media import MediaError, audio_of, decode_base64, from_data_url, image_of
from loadproof.protocol.openai import Chunk, chunk_decoder, error_message
from loadproof.protocol.request import Audio, Image, Message, Part, Request, Text, ToolResult, ToolUse, Video
from loadproof.protocol.routes.base import (
    Answer,
    BadRequest,
    Route,
    Writer,
    decode_error,
    encoder,
    json_object,
    model_of,
    pop_sampling,
    pop_stream,
    sampling_fields,
    usage_of,
)
from loadproof.protocol.routes.reading import Reading
from loadproof.protocol.sse import DONE_EVENT, encode_data

STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}


def content_part(part: Text | Image | Audio | Video) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image_url", "image_url": {"url": part.data_url()}}
    if isinstance(part, Audio):
        return {
            "type": "input_audio",
            "input_audio": {"data": base64.b64encode(part.data).decode(), "format": part.format},
        }
    frames = ",".join(base64.b64encode(f.data).decode() for f in part.frames)
    return {"type": "video_url", "video_url": {"url": f"data:video/jpeg;base64,{frames}"}}


def chat_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        results = [p for p in m.parts if isinstance(p, ToolResult)]
        for r in results:
            out.append({"role": "tool", "tool_call_id": r.call_id, "content": r.text})
        if results and len(results) == len(m.parts):
            continue
        uses = [p for p in m.parts if isinstance(p, ToolUse)]
        parts = [p for p in m.parts if not isinstance(p, (ToolUse, ToolResult))]
        body: dict[str, Any] = {"role": m.role}
        if len(parts) == 1 and isinstance(parts[0], Text):
            body["content"] = parts[0].text
        elif parts:
            body["content"] = [content_part(p) for p in parts]
        else:
            body["content"] = None if uses else ""
        if uses:
            body["tool_calls"] = [
                {"id": u.id, "type": "function", "function": {"name": u.name, "arguments": u.arguments}} for u in uses
            ]
        out.append(body)
    return out


def generation_fields(request: Request) -> dict[str, Any]:
    body = sampling_fields(request)
    if request.stream:
        body["stream"] = True
        body["stream_options"] = STREAM_OPTIONS
    return body


class ChunkRoute(Route):
    """A route whose answer streams chunks in the chat completions' shape (completions, chat, transcriptions)."""

    def feed(self, reading: Reading, payload: bytes, now: int) -> None:
        try:
            chunk = chunk_decoder.decode(payload)
        except msgspec.DecodeError as exc:
            raise decode_error(exc) from None
        feed_chunk(reading, chunk, now)

    def feed_all(self, reading: Reading, payloads: list[bytes], now: int) -> None:
        """A read's chunks in one pass, the usual one (answer text and its usage, nothing else) on locals, as the
        client read chat chunks before routes had adapters (tests/unit/protocol/test_route_readers.py holds the
        two paths to the same Reading); any other chunk goes through `feed_chunk`."""
        decode = chunk_decoder.decode
        add_ns, add_tokens, texts = reading.chunk_ns.append, reading.chunk_tokens.append, reading.texts
        keep_text = reading.keep_text
        for payload in payloads:
            if payload == b"[DONE]":
                reading.done = True
                continue
            try:
                chunk = decode(payload)
            except msgspec.DecodeError as exc:
                raise decode_error(exc) from None
            usage, choices = chunk.usage, chunk.choices
            if usage is not None and len(choices) == 1 and usage.completion_tokens is not None:
                choice = choices[0]
                delta = choice.delta
                piece = choice.text if delta is None else delta.content
                if (
                    piece
                    and choice.finish_reason is None
                    and usage.prompt_tokens_details is None
                    and usage.completion_tokens_details is None
                    and (
                        delta is None
                        or (delta.reasoning is None and delta.reasoning_content is None and not delta.tool_calls)
                    )
                    and reading.answer_ns is not None
                ):
                    reading.num_events += 1
                    completion = usage.completion_tokens
                    add_tokens(completion - reading.prev_tokens)
                    reading.prev_tokens = completion
                    add_ns(now)
                    reading.last_ns = now
                    if keep_text:
                        texts.append(piece)
                    continue
            feed_chunk(reading, chunk, now)


class ChatRoute(ChunkRoute):
    name = "chat"
    path = "/v1/chat/completions"
    media: ClassVar[frozenset[str]] = frozenset({"image", "audio", "video"})
    constraints: ClassVar[frozenset[str]] = frozenset({"tools", "response_format"})
    switches_thinking = True

    def encode(self, request: Request) -> bytes:
        messages = request.messages or (Message.text("user", request.prompt or ""),)
        body: dict[str, Any] = {"model": request.model, "messages": chat_messages(messages)}
        body.update(generation_fields(request))
        if request.tools:
            body["tools"] = list(request.tools)
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.response_format is not None:
            body["response_format"] = request.response_format
        body.update(request.extra)
        return encoder.encode(body)

    def parse(self, body: bytes, content_type: str) -> Request:
        data = json_object(body)
        messages = data.pop("messages", None)
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages must be a non-empty list")
        if not all(isinstance(m, dict) for m in messages):
            raise BadRequest("each message must be an object with a role and a content")
        model = model_of(data)
        sampling = pop_sampling(data, "max_tokens", "max_completion_tokens")
        stream = pop_stream(data)
        return Request(
            route=self.name,
            model=model,
            messages=tuple(messages_of(messages)),
            sampling=sampling,
            stream=stream,
            tools=tuple(data.pop("tools", None) or ()),
            tool_choice=data.pop("tool_choice", None),
            response_format=data.pop("response_format", None),
            extra=data,  # stream_options among them, as sent: the writer reads what was asked
        )

    def writer(self, request: Request, answer: Answer) -> Writer:
        return ChunkWriter(request, answer, *stream_usage(request))

    def whole(self, request: Request, answer: Answer, text: str, reasoning: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning:
            message[answer.reasoning_field] = reasoning
        choice = {"index": 0, "finish_reason": answer.finish_reason, "message": message}
        return whole_answer(answer, "chat.completion", choice)


def stream_usage(request: Request) -> tuple[bool, bool]:
    """(include_usage, continuous_usage_stats) as a request's `stream_options` ask them: continuous usage only
    with include_usage, as vLLM's `should_include_usage` reads them."""
    options = request.extra.get("stream_options")
    options = options if isinstance(options, dict) else {}
    include = bool(options.get("include_usage"))
    return include, include and bool(options.get("continuous_usage_stats"))


def whole_answer(answer: Answer, kind: str, choice: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": answer.id,
        "object": kind,
        "created": answer.created,
        "model": answer.model,
        "choices": [choice],
        "usage": usage_of(answer),
    }


class ChunkWriter(Writer):
    """A stream of chunks in the chat completions' shape (chat, completions and transcriptions send it)."""

    kind = "chat.completion.chunk"
    role_chunk = True  # the chat role chunk goes out with the first token

    def __init__(self, request: Request, answer: Answer, include_usage: bool, continuous_usage: bool) -> None:
        super().__init__(request, answer)
        self.include_usage = include_usage
        self.continuous_usage = continuous_usage
        self.started = False

    def encode(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None) -> bytes:
        a = self.answer
        chunk: dict[str, Any] = {"id": a.id, "object": self.kind, "created": a.created, "model": a.model}
        chunk["choices"] = choices
        if usage is not None:
            chunk["usage"] = usage
        return encode_data(encoder.encode(chunk))

    def so_far(self, completion: int) -> dict[str, Any] | None:
        return usage_of(self.answer, completion) if self.continuous_usage else None

    def choice(self, text: str, reasoning: bool) -> dict[str, Any]:
        field = self.answer.reasoning_field if reasoning else "content"
        return {"index": 0, "delta": {field: text}, "logprobs": None}

    def piece(self, text: str, reasoning: bool) -> bytes:
        out = b""
        if not self.started and self.role_chunk:
            role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            out = self.encode([role], self.so_far(0))
        self.started = True
        choice = self.choice(text, reasoning)
        last = self.answer.finish_reason is not None
        choice["finish_reason"] = self.answer.finish_reason
        if last:
            choice["stop_reason"] = None  # no stop string or stop token id ended it
        return out + self.encode([choice], self.so_far(self.answer.output_tokens))

    def close(self) -> bytes:
        final = self.encode([], usage_of(self.answer)) if self.include_usage else b""
        return final + DONE_EVENT

    def error(self, message: str) -> bytes:
        return encode_data(encoder.encode({"error": {"message": message, "type": "InternalServerError", "code": 500}}))


def feed_chunk(reading: Reading, chunk: Chunk, now: int) -> None:
    """One chunk in the chat completions' shape (completions, chat and transcriptions stream it). The client's
    hot loop: the usage and a chunk of answer text alone are taken here without a call (`Reading.usage` and
    `Reading.piece` do the same for the rarer chunks), which keeps a stream's events as cheap to read as when
    the client read chat chunks inline."""
    reading.num_events += 1
    usage = chunk.usage
    tokens = 0
    if usage is not None:
        completion = usage.completion_tokens
        if completion is not None:
            reading.has_usage = True
            tokens = completion - reading.prev_tokens
            reading.prev_tokens = completion
            if usage.prompt_tokens is not None:
                reading.prompt_tokens = usage.prompt_tokens
            details, out = usage.prompt_tokens_details, usage.completion_tokens_details
            if details is not None and details.cached_tokens is not None:
                reading.cached_tokens = details.cached_tokens
            if out is not None and out.reasoning_tokens is not None:
                reading.engine_reasoning_tokens = out.reasoning_tokens
    choices = chunk.choices
    if not choices:
        message = error_message(chunk)
        if message is not None:
            raise StreamError(message)
        return
    if usage is None:
        reading.per_event_usage = False
    choice = choices[0]
    if choice.finish_reason is not None:
        reading.finish_reason = choice.finish_reason
    delta = choice.delta
    if delta is None:
        piece, reasoning, calls = choice.text, None, None
    else:
        piece, reasoning, calls = delta.content, delta.reasoning_content or delta.reasoning, delta.tool_calls
    if piece and reasoning is None and not calls:  # answer text alone: most chunks of most streams
        if reading.first_ns is None:
            reading.first_ns = now
        if reading.answer_ns is None:
            reading.answer_ns = now
        if reading.keep_text:
            reading.texts.append(piece)
        reading.last_ns = now
        reading.chunk_ns.append(now)
        reading.chunk_tokens.append(tokens)
        return
    if calls:
        for d in calls:
            fn = d.function
            reading.call(d.index, d.id, fn.name if fn else None, fn.arguments if fn else None)
    reading.piece(now, piece, reasoning, bool(calls), tokens)


def messages_of(messages: list[Message] | list[dict[str, Any]]) -> list[Message]:
    """Typed messages from the chat API's shape (content as a string or parts; an assistant's `tool_calls`;
    a `tool` message's `tool_call_id`). Typed messages pass through."""
    out: list[Message] = []
    for m in messages:
        if isinstance(m, Message):
            out.append(m)
            continue
        role = m.get("role", "user")
        parts: list[Part] = []
        content = m.get("content")
        if role == "tool":
            parts.append(ToolResult(str(m.get("tool_call_id", "")), _plain(content)))
        elif isinstance(content, str):
            parts.append(Text(content))
        elif isinstance(content, list):
            parts.extend(_part(p) for p in content)
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            parts.append(ToolUse(str(call.get("id", "")), str(fn.get("name", "")), str(fn.get("arguments", ""))))
        out.append(Message(role, tuple(parts)))
    return out


def _plain(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _part(p: Any) -> Part:
    """One chat content part: text, or media given inline (a data URL, base64 audio). MediaError for media
    that is not what it says, and for a URL (never fetched)."""
    if isinstance(p, (Text, Image, Audio, Video, ToolUse, ToolResult)):
        return p
    if not isinstance(p, dict):
        return Text(str(p))
    kind = p.get("type")
    if kind == "image_url":
        mime, data = from_data_url(_url(p.get("image_url")))
        return image_of(data, mime)
    if kind == "input_audio":
        audio = p.get("input_audio") or {}
        fmt = str(audio.get("format", "wav"))
        return audio_of(decode_base64(str(audio.get("data", ""))), f"audio/{fmt}")
    if kind == "video_url":
        head, _, rest = _url(p.get("video_url")).partition(",")
        if head != "data:video/jpeg;base64":
            raise MediaError("a video is sent as its JPEG frames: data:video/jpeg;base64,F1,F2,...")
        frames = rest.split(",")
        return Video([image_of(decode_base64(f), "image/jpeg") for f in frames])
    if kind not in (None, "text"):
        raise MediaError(f"a content part of type {kind!r} (loadproof sends text, image_url, input_audio, video_url)")
    return Text(str(p.get("text", "")))


def _url(value: Any) -> str:
    return str(value.get("url", "")) if isinstance(value, dict) else str(value or "")


ROUTE = ChatRoute()
