"""A pooling model's answers in the simulator (`runner = "pooling"`, as vLLM's `--runner pooling`): what
/v1/embeddings and /v1/rerank take from a body, and the bodies they answer with. Each input is a request of its
own that prefills and ends (`SimServer`); its vector is drawn from its text (`text.embedding`)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from loadproof.sim import text


def embedding_inputs(body: dict[str, Any]) -> list[str] | None:
    """/v1/embeddings' `input`, a string or a non-empty list of strings; None where it is neither."""
    inputs = body.get("input")
    inputs = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
        return None
    return inputs


def rerank_inputs(body: dict[str, Any]) -> tuple[str, list[str]] | None:
    """/v1/rerank's `query` (a string) and `documents` (a string or a non-empty list); None where not."""
    query, documents = body.get("query"), body.get("documents")
    documents = [documents] if isinstance(documents, str) else documents
    if not isinstance(query, str) or not isinstance(documents, list) or not documents:
        return None
    if not all(isinstance(d, str) for d in documents):
        return None
    return query, documents


def embeddings(model: str, dim: int, inputs: list[str], tokens: int) -> dict[str, Any]:
    """The /v1/embeddings body: a vector of `dim` for each input, in order."""
    return {
        "id": f"embd-{uuid.uuid4().hex[:16]}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": [
            {"object": "embedding", "index": k, "embedding": text.embedding(i, dim)} for k, i in enumerate(inputs)
        ],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def rerank(model: str, dim: int, query: str, documents: list[str], tokens: int) -> dict[str, Any]:
    """The /v1/rerank body, as vLLM serves it for an embedding model: each document scored by its vector's
    cosine with the query's, best first."""
    q = text.embedding(query, dim)
    scores = [sum(a * b for a, b in zip(q, text.embedding(d, dim))) for d in documents]  # unit vectors: cosine
    best_first = sorted(range(len(documents)), key=lambda k: -scores[k])
    results = [{"index": k, "relevance_score": scores[k], "document": {"text": documents[k]}} for k in best_first]
    return {
        "id": f"rerank-{uuid.uuid4().hex[:16]}",
        "model": model,
        "results": results,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
