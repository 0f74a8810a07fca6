"""`/v1/embeddings`: texts in, one JSON answer out (one vector per input). Only each vector's index and the
usage are read; the vectors themselves are skipped, not built. The answer's arrival is its first and its
last token; it has no output tokens."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.openai import embeddings_decoder, error_message
from loadproof.protocol.request import Request
from loadproof.protocol.routes.base import (
    Answer,
    BadRequest,
    Embed,
    PooledItems,
    Route,
    encoder,
    json_object,
    model_of,
)
from loadproof.records import RequestRecord


class EmbeddingsRoute(Route):
    name = "embeddings"
    path = "/v1/embeddings"
    streams = False
    conversational = False
    what = "vector"
    verb = "embed"
    items = PooledItems(
        "embeddings",
        "vectors",
        "vectors returned by successful requests / duration",
        "vectors returned / successful requests (the batch each request embedded)",
    )

    def encode(self, request: Request) -> bytes:
        inputs = list(request.inputs) or [request.text]
        body: dict[str, Any] = {
            "model": request.model,
            "input": inputs[0] if len(inputs) == 1 else inputs,
            "encoding_format": "float",
        }
        body.update(request.extra)
        return encoder.encode(body)

    def parse(self, body: bytes, content_type: str) -> Request:
        data = json_object(body)
        inputs = data.pop("input", None)
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
            raise BadRequest("input must be a string or a non-empty list of strings")
        model = model_of(data)
        if data.get("encoding_format") == "float":
            del data["encoding_format"]  # encode's own
        return Request(route=self.name, model=model, inputs=tuple(inputs), stream=False, extra=data)

    def pooled(self, request: Request, answer: Answer, embed: Embed) -> dict[str, Any]:
        """A vector for each input, in order (`embed`), as vLLM's /v1/embeddings answers."""
        return {
            "id": f"embd-{answer.id}",
            "object": "list",
            "created": answer.created,
            "model": answer.model,
            "data": [{"object": "embedding", "index": k, "embedding": embed(i)} for k, i in enumerate(request.inputs)],
            "usage": {"prompt_tokens": answer.prompt_tokens, "total_tokens": answer.prompt_tokens},
        }

    def answer(self, record: RequestRecord, body: bytes) -> None:
        try:
            answer = embeddings_decoder.decode(body)
        except msgspec.DecodeError as exc:
            raise StreamError(f"undecodable answer: {exc}") from None
        pooled(record, answer, len(answer.data), "vector")


def pooled(record: RequestRecord, answer: Any, items: int, what: str) -> None:
    message = error_message(answer)
    if message is not None:
        raise StreamError(message)
    if not items:
        raise StreamError(f"the answer holds no {what}")
    record.first_token_ns = record.last_token_ns = record.end_ns
    record.num_chunks = 1
    record.chunk_usage = False
    record.vectors = items
    record.output_tokens = 0
    if answer.usage is not None:
        record.prompt_tokens = answer.usage.prompt_tokens


ROUTE = EmbeddingsRoute()
