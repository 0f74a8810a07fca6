"""The OpenAI-compatible wire types loadproof reads: streamed chunks, pooling answers, in-band errors.

Request bodies are written by the route adapters (`protocol.routes`); the chat-shaped chunk below is what the
completions, chat and transcriptions routes read.

Decoding goes through msgspec structs that name only the fields loadproof needs, so every other
field of a chunk is skipped without building Python objects for it. Both `/v1/completions`
(`choices[].text`) and `/v1/chat/completions` (`choices[].delta.content`, reasoning under either
`reasoning_content` or `reasoning`, and tool calls under `tool_calls`, their arguments in pieces) are
understood. An error arrives in-band either as
`{"error": {...}}` or, in older vLLM, as `{"object": "error", "message": ...}`.

`/v1/embeddings` answers one JSON body, not a stream: `EmbeddingsAnswer` reads only each vector's index and the
usage (the vectors themselves are skipped, not built). `/v1/rerank` (vLLM, Jina and Cohere's shape: a query
and documents) too: `RerankAnswer` reads each result's index and the usage.
"""

from __future__ import annotations

from typing import Any

import msgspec

# what loadproof's relay measured of a disaggregated pair's prefill hop, on the answer (relay.prefill)
PREFILL_S_HEADER = "x-loadproof-prefill-s"
KV_BYTES_HEADER = "x-loadproof-kv-bytes"


class FunctionDelta(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None  # a piece of the call's JSON arguments; the pieces of one call concatenate


class ToolCallDelta(msgspec.Struct):
    index: int = 0  # which of the answer's tool calls this piece belongs to
    id: str | None = None
    function: FunctionDelta | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None  # vLLM before 0.10, SGLang
    reasoning: str | None = None  # vLLM since 0.10
    tool_calls: list[ToolCallDelta] | None = None


class Choice(msgspec.Struct):
    text: str | None = None
    delta: Delta | None = None
    finish_reason: str | None = None


class PromptTokensDetails(msgspec.Struct):
    cached_tokens: int | None = None  # prompt tokens the engine served from its prefix cache


class CompletionTokensDetails(msgspec.Struct):
    reasoning_tokens: int | None = None  # of completion_tokens, those spent reasoning (where the server counts them)


class Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # reasoning tokens included
    prompt_tokens_details: PromptTokensDetails | None = None  # vLLM: with --enable-prompt-tokens-details
    completion_tokens_details: CompletionTokensDetails | None = None


class Answer(msgspec.Struct):
    """What every answer body or streamed chunk may carry: its usage, and an in-band error."""

    usage: Usage | None = None
    error: Any = None
    object: str | None = None
    message: str | None = None


class Chunk(Answer):
    choices: list[Choice] = []


chunk_decoder = msgspec.json.Decoder(Chunk)


class EmbeddingItem(msgspec.Struct):
    index: int = 0  # the input it embeds; its `embedding` is not read


class EmbeddingsAnswer(Answer):
    data: list[EmbeddingItem] = []


embeddings_decoder = msgspec.json.Decoder(EmbeddingsAnswer)


class RerankItem(msgspec.Struct):
    index: int = 0  # the document it scores; its `relevance_score` is not read


class RerankAnswer(Answer):
    results: list[RerankItem] = []


rerank_decoder = msgspec.json.Decoder(RerankAnswer)
_encoder = msgspec.json.Encoder()


def error_message(chunk: Answer) -> str | None:
    """The in-band error a chunk carries, or None when it carries none."""
    if chunk.error is not None:
        err = chunk.error
        if isinstance(err, dict):
            return str(err.get("message") or err.get("type") or err)
        return str(err)
    if chunk.object == "error":
        return chunk.message or "error"
    return None


def error_body(message: str, kind: str = "server_error", code: int = 500) -> bytes:
    """An OpenAI-style error object, for in-band stream errors and HTTP error answers."""
    return _encoder.encode({"error": {"message": message, "type": kind, "code": code}})
