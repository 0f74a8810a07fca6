"""`/v1/embeddings`: texts in, one JSON answer out (one vector per input). Only each vector's index and the
usage are read; the vectors themselves are skipped, not built. The answer's arrival is its first and its
last token; it has no output tokens."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.openai import embeddings_decoder, error_message
from loadproof.protocol.request import Request
from loadproof.protocol.routes.base import PooledItems, Route, encoder
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
