"""`/v1/rerank` (vLLM, Jina and Cohere's shape): a query and the documents to score against it, every one
scored (no top_n). A request's `inputs` are the query, then the documents; one JSON answer, of which each
result's index and the usage are read."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.errors import StreamError
from loadproof.protocol.openai import rerank_decoder
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

    def parse(self, body: bytes, content_type: str) -> Request:
        data = json_object(body)
        query, documents = data.pop("query", None), data.pop("documents", None)
        documents = [documents] if isinstance(documents, str) else documents
        if (
            not isinstance(query, str)
            or not isinstance(documents, list)
            or not documents
            or not all(isinstance(d, str) for d in documents)
        ):
            raise BadRequest("query must be a string and documents a string or a non-empty list of strings")
        model = model_of(data)
        return Request(route=self.name, model=model, inputs=(query, *documents), stream=False, extra=data)

    def pooled(self, request: Request, answer: Answer, embed: Embed) -> dict[str, Any]:
        """As vLLM serves /v1/rerank for an embedding model: each document scored by its vector's cosine with
        the query's (`embed` gives unit vectors), best first."""
        query, *documents = request.inputs
        q = embed(query)
        scores = [sum(a * b for a, b in zip(q, embed(d))) for d in documents]
        best_first = sorted(range(len(documents)), key=lambda k: -scores[k])
        results = [{"index": k, "relevance_score": scores[k], "document": {"text": documents[k]}} for k in best_first]
        usage = {"prompt_tokens": answer.prompt_tokens, "total_tokens": answer.prompt_tokens}
        return {"id": f"rerank-{answer.id}", "model": answer.model, "results": results, "usage": usage}

    def answer(self, record: RequestRecord, body: bytes) -> None:
        try:
            answer = rerank_decoder.decode(body)
        except msgspec.DecodeError as exc:
            raise StreamError(f"undecodable answer: {exc}") from None
        pooled(record, answer, len(answer.results), "score")


ROUTE = RerankRoute()
