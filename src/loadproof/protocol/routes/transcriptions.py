"""`/v1/audio/transcriptions`: one audio file in (a multipart form, as the OpenAI API takes it), a stream of
`transcription.chunk` events out, shaped as chat chunks (`choices[].delta.content`, the usage on every chunk
with `stream_continuous_usage_stats`). The request's first audio part is the file; its text, if any, is the
`prompt` (a transcription's context, not an instruction)."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from loadproof.errors import UsageError
from loadproof.protocol.openai import chunk_decoder
from loadproof.protocol.request import Audio, Request
from loadproof.protocol.routes.base import Route, decode_error
from loadproof.protocol.routes.chat import feed_chunk
from loadproof.protocol.routes.reading import Reading

# the form's boundary: fixed, so the content type is the route's own; a file that holds it is refused
BOUNDARY = "loadproof-form-4f1c9a7e2b6d8053"


class TranscriptionsRoute(Route):
    name = "transcriptions"
    path = "/v1/audio/transcriptions"
    conversational = False
    media: ClassVar[frozenset[str]] = frozenset({"audio"})

    def _audio(self, request: Request) -> Audio:
        for part in request.media():
            if isinstance(part, Audio):
                return part
        raise UsageError("a transcription request needs an audio part (--audio-s SECONDS, or a data set's audio)")

    content_type = f"multipart/form-data; boundary={BOUNDARY}"

    def encode(self, request: Request) -> bytes:
        audio = self._audio(request)
        mark = BOUNDARY.encode()
        if mark in audio.data:
            raise UsageError("an audio file holds the multipart boundary; it cannot be sent as a form")
        s = request.sampling
        fields: dict[str, Any] = {
            "model": request.model,
            "max_completion_tokens": s.max_tokens,
            "temperature": s.temperature,
            "response_format": "json",
        }
        if request.stream:
            fields.update(stream="true", stream_include_usage="true", stream_continuous_usage_stats="true")
        if s.seed is not None:
            fields["seed"] = s.seed
        text = "\n".join(m.plain for m in request.messages if m.plain)
        if text:
            fields["prompt"] = text
        fields.update(request.extra)
        out = bytearray()
        for key, value in fields.items():
            out += b"--" + mark + b"\r\n"
            out += f'Content-Disposition: form-data; name="{key}"\r\n\r\n'.encode()
            out += (value if isinstance(value, str) else msgspec.json.encode(value).decode().strip('"')).encode()
            out += b"\r\n"
        out += b"--" + mark + b"\r\n"
        out += f'Content-Disposition: form-data; name="file"; filename="audio.{audio.format}"\r\n'.encode()
        out += f"Content-Type: {audio.mime}\r\n\r\n".encode() + audio.data + b"\r\n"
        out += b"--" + mark + b"--\r\n"
        return bytes(out)

    def feed(self, reading: Reading, payload: bytes, now: int) -> None:
        try:
            chunk = chunk_decoder.decode(payload)
        except msgspec.DecodeError as exc:
            raise decode_error(exc) from None
        feed_chunk(reading, chunk, now)


ROUTE = TranscriptionsRoute()
