"""`/v1/completions`: one raw prompt (no chat template), a stream of `choices[].text` chunks.

A request given as messages is sent as their text joined (media cannot be carried: the route takes none).
Served as vLLM 0.32's `completion/serving.py` streams: the chat route's chunks (`chat.ChunkWriter`) without the
role chunk, each token's text under `choices[].text`.
"""

from __future__ import annotations

from typing import Any

from loadproof.protocol.request import Request
from loadproof.protocol.routes.base import (
    Answer,
    BadRequest,
    Writer,
    encoder,
    json_object,
    model_of,
    pop_sampling,
    pop_stream,
)
from loadproof.protocol.routes.chat import (
    ChunkRoute,
    ChunkWriter,
    generation_fields,
    stream_usage,
    whole_answer,
)


class TextChunks(ChunkWriter):
    kind = "text_completion"
    role_chunk = False

    def choice(self, text: str, reasoning: bool) -> dict[str, Any]:
        return {"index": 0, "text": text, "logprobs": None}


class CompletionsRoute(ChunkRoute):
    name = "completions"
    path = "/v1/completions"
    conversational = False

    def encode(self, request: Request) -> bytes:
        body: dict[str, Any] = {"model": request.model, "prompt": request.text}
        body.update(generation_fields(request))
        body.update(request.extra)
        return encoder.encode(body)

    def parse(self, body: bytes, content_type: str) -> Request:
        data = json_object(body)
        prompt = data.pop("prompt", None)
        if isinstance(prompt, list):  # a batch of prompts: its first, as one request
            prompt = prompt[0] if prompt and isinstance(prompt[0], str) else None
        if not isinstance(prompt, str):
            raise BadRequest("prompt must be a string")
        model = model_of(data)
        sampling = pop_sampling(data, "max_tokens")
        stream = pop_stream(data)
        return Request(
            route=self.name, model=model, prompt=prompt, inputs=(prompt,), sampling=sampling, stream=stream, extra=data
        )

    def writer(self, request: Request, answer: Answer) -> Writer:
        return TextChunks(request, answer, *stream_usage(request))

    def whole(self, request: Request, answer: Answer, text: str, reasoning: str) -> dict[str, Any]:
        choice = {"index": 0, "finish_reason": answer.finish_reason, "text": reasoning + text}
        return whole_answer(answer, "text_completion", choice)


ROUTE = CompletionsRoute()
