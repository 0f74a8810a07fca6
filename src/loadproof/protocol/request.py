"""One request as loadproof means it, whatever the route it goes to: typed content parts, tools, a response
format, sampling, the model (or adapter) and the route's name.

A route adapter (`protocol.routes`) writes it as its API's body and reads the answer into a RequestRecord;
nothing else knows how an API spells a message. The parts:

- `Text`; `Image` (encoded PNG or JPEG bytes, with its size in pixels); `Audio` (encoded WAV bytes, with
  its length in seconds); `Video` (its frames as images, as vLLM takes a video of frames);
- `ToolUse` (an assistant's call of a tool: id, name, JSON arguments) and `ToolResult` (the tool's answer
  to one call).

Tools and the response format are kept in the chat API's shape (`{"type": "function", "function": {...}}`,
`{"type": "json_schema", "json_schema": {...}}`); a route of another API translates them. `extra` holds the
fields an engine takes beyond any API (`chat_template_kwargs`, `ignore_eos`'s kin): every route that
generates passes it through unchanged.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, Literal

import msgspec

Role = Literal["system", "user", "assistant", "tool"]


class Text(msgspec.Struct, frozen=True, tag="text"):
    text: str


class Image(msgspec.Struct, frozen=True, tag="image"):
    data: bytes  # the encoded file
    mime: str  # image/png, image/jpeg
    width: int
    height: int

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode()}"

    @property
    def pixels(self) -> int:
        return self.width * self.height


class Audio(msgspec.Struct, frozen=True, tag="audio"):
    data: bytes  # the encoded file (WAV)
    mime: str  # audio/wav
    seconds: float

    @property
    def format(self) -> str:
        """The file format's short name, as the chat API's `input_audio.format` takes it."""
        return self.mime.split("/", 1)[-1].removeprefix("x-")


class Video(msgspec.Struct, frozen=True, tag="video"):
    frames: list[Image]  # sent as one video of these frames

    @property
    def pixels(self) -> int:
        return sum(f.pixels for f in self.frames)


class ToolUse(msgspec.Struct, frozen=True, tag="tool_use"):
    id: str
    name: str
    arguments: str  # JSON text


class ToolResult(msgspec.Struct, frozen=True, tag="tool_result"):
    call_id: str
    text: str


Part = Text | Image | Audio | Video | ToolUse | ToolResult
MEDIA = (Image, Audio, Video)


class Message(msgspec.Struct, frozen=True):
    role: Role
    parts: tuple[Part, ...]

    @classmethod
    def text(cls, role: Role, text: str) -> Message:
        return cls(role, (Text(text),))

    @property
    def plain(self) -> str:
        """Its text parts joined (media, tool uses and results left out)."""
        return "".join(p.text for p in self.parts if isinstance(p, Text))


class Sampling(msgspec.Struct, frozen=True):
    max_tokens: int = 16
    temperature: float = 0.0
    seed: int | None = None
    ignore_eos: bool = False


class Request(msgspec.Struct, frozen=True, kw_only=True):
    route: str
    model: str
    messages: tuple[Message, ...] = ()  # a conversation; or `prompt`, one raw text with no template
    prompt: str | None = None
    inputs: tuple[str, ...] = ()  # a pooling route's: texts to embed; a rerank's query, then its documents
    sampling: Sampling = Sampling()
    stream: bool = True
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    extra: dict[str, Any] = {}

    @property
    def text(self) -> str:
        """The request's text: its prompt, or its messages' text parts joined."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(m.plain for m in self.messages)

    def media(self) -> list[Image | Audio | Video]:
        return [p for m in self.messages for p in m.parts if isinstance(p, MEDIA)]


def digest(data: bytes) -> str:
    """The hash a published record or plan keeps of a media file instead of its bytes."""
    return hashlib.sha256(data).hexdigest()[:16]
