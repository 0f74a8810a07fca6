"""`/v1/audio/transcriptions`: one audio file in (a multipart form, as the OpenAI API takes it), a stream of
`transcription.chunk` events out, shaped as chat chunks (`choices[].delta.content`, the usage on every chunk
with `stream_continuous_usage_stats`). The request's first audio part is the file; its text, if any, is the
`prompt` (a transcription's context, not an instruction).

Served as vLLM 0.32's `speech_to_text/base/serving.py` streams: one `transcription.chunk` a token
(`choices: [{"delta": {"content": ...}}]`, the last with `finish_reason` and `stop_reason`), its counts so far as
`usage` with `stream_include_usage` and `stream_continuous_usage_stats`, a final chunk of no choices with the
usage (with `stream_include_usage`), then `[DONE]`."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from loadproof.errors import UsageError
from loadproof.protocol.media import audio_of
from loadproof.protocol.request import Audio, Message, Part, Request, Text
from loadproof.protocol.routes.base import Answer, BadRequest, Writer, pop_sampling, usage_of
from loadproof.protocol.routes.chat import ChunkRoute, ChunkWriter
from loadproof.protocol.sse import DONE_EVENT

# the form's boundary: fixed, so the content type is the route's own; a file that holds it is refused
BOUNDARY = "loadproof-form-4f1c9a7e2b6d8053"


class TranscriptionsRoute(ChunkRoute):
    name = "transcriptions"
    path = "/v1/audio/transcriptions"
    conversational = False
    takes_text = False  # the audio file is the request (`run load` sends no text: no tokenizer needed)
    media: ClassVar[frozenset[str]] = frozenset({"audio"})
    # vLLM's usage.prompt_tokens counts the audio's log-mel frames (100 a second) and the decoder's 4 prompt
    # tokens; its vllm:prompt_tokens counter counts the decoder's alone
    prompt_usage_counted_by_engine = False

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

    def parse(self, body: bytes, content_type: str) -> Request:
        fields, files = form_of(body, content_type)
        if "file" not in files:
            raise BadRequest("a transcription request needs its audio as the form's `file`")
        mime, data = files["file"]
        audio = audio_of(data, mime or None)
        model = fields.pop("model", "")
        sampling = pop_sampling(fields, "max_completion_tokens", "max_tokens")
        stream = fields.pop("stream", "false") == "true"
        if fields.get("response_format") == "json":
            del fields["response_format"]  # encode's own
        prompt = fields.pop("prompt", "")
        parts: tuple[Part, ...] = ((Text(prompt),) if prompt else ()) + (audio,)
        return Request(
            route=self.name,
            model=model,
            messages=(Message("user", parts),),
            sampling=sampling,
            stream=stream,
            extra=dict(fields),  # the stream's usage options among them, as sent
        )

    def writer(self, request: Request, answer: Answer) -> Writer:
        include = request.extra.get("stream_include_usage") == "true"
        continuous = include and request.extra.get("stream_continuous_usage_stats") == "true"
        return TranscriptionChunks(request, answer, include, continuous)

    def whole(self, request: Request, answer: Answer, text: str, reasoning: str) -> dict[str, Any]:
        usage = usage_of(answer)
        usage.pop("prompt_tokens_details", None)
        return {"text": reasoning + text, "usage": usage}


class TranscriptionChunks(ChunkWriter):
    kind = "transcription.chunk"
    role_chunk = False

    def piece(self, text: str, reasoning: bool) -> bytes:
        choice: dict[str, Any] = {"delta": {"content": text}}
        if self.answer.finish_reason is not None:
            choice.update(finish_reason=self.answer.finish_reason, stop_reason=None)
        return self.encode([choice], self.so_far(self.answer.output_tokens))

    def close(self) -> bytes:
        usage = usage_of(self.answer)
        usage.pop("prompt_tokens_details", None)  # vLLM's transcription usage has none
        return (self.encode([], usage) if self.include_usage else b"") + DONE_EVENT


def form_of(body: bytes, content_type: str) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    """A multipart/form-data body's fields (name to text) and files (name to its Content-Type and bytes)."""
    kind, _, params = content_type.partition(";")
    boundary = ""
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key == "boundary":
            boundary = value.strip('"')
    if kind.strip() != "multipart/form-data" or not boundary:
        raise BadRequest("a transcription request is a multipart/form-data form with a boundary")
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, bytes]] = {}
    mark = b"--" + boundary.encode()
    for chunk in body.split(mark)[1:]:
        if chunk.startswith(b"--"):
            break
        head, sep, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            raise BadRequest("a form part without its headers")
        content = content.removesuffix(b"\r\n")
        headers = {}
        for line in head.decode("utf-8", "replace").split("\r\n"):
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        disposition = dict(
            (k.strip(), v.strip().strip('"'))
            for k, _, v in (p.partition("=") for p in headers.get("content-disposition", "").split(";")[1:])
        )
        name = disposition.get("name", "")
        if "filename" in disposition:
            files[name] = (headers.get("content-type", ""), content)
        else:
            fields[name] = content.decode("utf-8", "replace")
    return fields, files


ROUTE = TranscriptionsRoute()
