"""`/v1/rerank` (vLLM, Jina and Cohere's shape): a query and the documents to score against it, every one
scored (no top_n). A request's `inputs` are the query, then the documents; one JSON answer, of which each
result's index and the usage are read."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.openai import rerank_decoder
from loadproof.protocol.request import Request
from loadproof.protocol.routes.base import PooledItems, Route, encoder
from loadproof.protocol.routes.embeddings import pooled
from loadproof.records import RequestRecord


class RerankRoute(Route):
    name = "rerank"
    path = "/v1/rerank"
    streams = False
    conversational = False
    extra_inputs = 1  # the query, beside the documents: a request of k documents holds k + 1 texts
    verb = "rerank"
    items = PooledItems(
        "rerank",
        "documents",
        "documents scored (results returned) by successful requests / duration",
        "documents scored / successful requests (the documents each query was ranked against)",
    )
    takes_dataset = False  # a row is no query with documents

    def encode(self, request: Request) -> bytes:
        query, *documents = request.inputs or (request.text,)
        body: dict[str, Any] = {"model": request.model, "query": query, "documents": documents or [query]}
        body.update(request.extra)
        return encoder.encode(body)

    def answer(self, record: RequestRecord, body: bytes) -> None:
        try:
            answer = rerank_decoder.decode(body)
        except msgspec.DecodeError as exc:
            raise StreamError(f"undecodable answer: {exc}") from None
        pooled(record, answer, len(answer.results), "score")


ROUTE = RerankRoute()
