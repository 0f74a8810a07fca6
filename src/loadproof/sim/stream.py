"""One generation's stream in the simulator: the tokens the engine loop hands over, and the SSE chunks they
become, shaped as vLLM 0.32's OpenAI server shapes them (`chat_completion/serving.py`,
`completion/serving.py`):

- nothing is sent before the engine has the first token: the chat role chunk (`delta: {"role": "assistant",
  "content": ""}`) goes out on the first engine output, right before the first token's chunk, never before
  the prefill;
- each token is one chunk; `finish_reason` rides on the last token's chunk (with `stop_reason`), there is no
  empty chunk of its own;
- usage: with `stream_options.include_usage` a final chunk with no choices carries it (with
  `prompt_tokens_details`, as vLLM with `--enable-prompt-tokens-details`); with `continuous_usage_stats` as
  well (only then, as vLLM's `should_include_usage` reads them), every chunk carries the counts so far (the
  role chunk 0 completion tokens).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import msgspec

from loadproof.protocol.sse import encode_data
from loadproof.sim.scheduler import SimRequest

_json = msgspec.json.Encoder()


@dataclass
class Stream:
    """A request's answer: its text (one token a byte), where it would end by itself, and the tokens the engine
    loop has produced, each as (index in the output, whether it is the last)."""

    request: SimRequest
    text: str
    natural_end: int
    ignore_eos: bool
    reasoning: int = 0  # the first `reasoning` tokens of `text` are reasoning, streamed apart from the answer
    tokens: asyncio.Queue[tuple[int, bool]] = field(default_factory=asyncio.Queue)

    def piece(self, index: int) -> str:
        return self.text[index] if index < len(self.text) else " "


async def num_tokens(stream: Stream) -> int:
    """Waits for the stream's last token; how many tokens it had."""
    while True:
        index, last = await stream.tokens.get()
        if last:
            return index + 1


def usage(request: SimRequest, completion_tokens: int | None = None) -> dict[str, Any]:
    """The whole usage (an answer's, a stream's final one), or, given `completion_tokens`, a stream chunk's
    continuous usage: the tokens sent so far, without `prompt_tokens_details`, as vLLM sends it."""
    completion = request.num_output if completion_tokens is None else completion_tokens
    out: dict[str, Any] = {
        "prompt_tokens": request.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": request.prompt_tokens + completion,
    }
    if completion_tokens is None and request.cached_tokens is not None:  # as vLLM with
        out["prompt_tokens_details"] = {"cached_tokens": request.cached_tokens}  # --enable-prompt-tokens-details
    return out


@dataclass(frozen=True)
class Chunks:
    """The encoded SSE events of one stream, as vLLM 0.32 sends them."""

    stream: Stream
    model: str
    created: int
    chat: bool
    reasoning_field: str
    include_usage: bool
    continuous_usage: bool

    @classmethod
    def of(cls, stream: Stream, model: str, created: int, chat: bool, reasoning_field: str, options: Any) -> Chunks:
        """From the request's `stream_options`: continuous usage only with include_usage, as vLLM reads them."""
        options = options if isinstance(options, dict) else {}
        include = bool(options.get("include_usage"))
        return cls(
            stream,
            model,
            created,
            chat,
            reasoning_field,
            include,
            include and bool(options.get("continuous_usage_stats")),
        )

    def _encode(self, choices: list[dict[str, Any]], chunk_usage: dict[str, Any] | None) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.stream.request.request_id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if chunk_usage is not None:
            chunk["usage"] = chunk_usage
        return encode_data(_json.encode(chunk))

    def _so_far(self, completion_tokens: int) -> dict[str, Any] | None:
        return usage(self.stream.request, completion_tokens) if self.continuous_usage else None

    def role(self) -> bytes | None:
        """The chat role chunk, sent with the first token (None for /v1/completions)."""
        if not self.chat:
            return None
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        return self._encode([choice], self._so_far(0))

    def token(self, index: int, last: bool) -> bytes:
        """Token `index`'s chunk; the last one carries the finish reason."""
        s = self.stream
        piece = s.piece(index)
        choice: dict[str, Any] = {"index": 0}
        if self.chat:
            choice["delta"] = {self.reasoning_field if index < s.reasoning else "content": piece}
        else:
            choice["text"] = piece
        choice["logprobs"] = None
        choice["finish_reason"] = s.request.finish_reason if last else None
        if last:
            choice["stop_reason"] = None  # no stop string or stop token id ended it
        return self._encode([choice], self._so_far(index + 1))

    def final_usage(self) -> bytes | None:
        """With include_usage, the chunk after the last token: no choices, the whole usage."""
        return self._encode([], usage(self.stream.request)) if self.include_usage else None
