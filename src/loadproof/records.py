"""Record types shared by the client (which fills them), the run directory (which stores them) and the
metrics (which compute claims from them). Standard library and msgspec only: `verify` reaches this
module, and it must need no HTTP client, tokenizer or model.

RequestRecord: the flat result of one request, as stored in `requests.jsonl`.

Times are `perf_counter_ns()` readings from the run's clock (the manifest holds one wall-clock
anchor to place them in real time). `first_token_ns` is the arrival of the first chunk with
non-empty content or reasoning; `last_token_ns` the arrival of the last chunk that carried tokens
or content; `end_ns` the end of the response (after `[DONE]`, or the failure). Token counts come
from the server's usage; `chunk_ns`/`chunk_tokens` hold, per token-bearing chunk, its arrival time
and the tokens it added (from `continuous_usage_stats`; 0 when the server gives no per-chunk usage,
`chunk_usage` is then False). The chunk lists go to `chunks.jsonl`, the rest to `requests.jsonl`.

A reasoning model streams two kinds of text: reasoning (`reasoning_text`) and the answer (`output_text`,
tool calls in `tool_calls`). `first_token_ns` is the first token of either kind, `first_answer_ns` the
first chunk of the answer (content or a tool call); `reasoning_tokens` the tokens of the chunks that
carried reasoning only (per-chunk usage), `engine_reasoning_tokens` the server's own count where its usage
gives one. `output_tokens` counts both kinds, as the server's usage does.
An answer checked against a schema (`--response-format json_schema`, `--tools`) keeps the verdict in
`output_valid` (None: not checked) and why it failed in `output_invalid_reason`.
An embeddings or rerank request is not streamed: its first and last token are the arrival of its answer, its
output tokens 0, and `vectors` the vectors (or the documents' scores) it returned (None for a generation request).
Behind loadproof's relay in front of a disaggregated prefill/decode pair, `prefill_hop_ns` is the time the
relay's request to the prefill instance took (queue, prefill, the KV connector's save) and `kv_bytes` what the
connector wrote for the prompt, both from the answer's headers (None elsewhere).
A request that carries media (a multimodal load run) keeps what they were, never their bytes: `images`,
`video_frames` (a video's frames, every video of the request), `audio_s`, `media_pixels` (images and frames),
`media_bytes` (the encoded files), `media_hashes` (each item's digest, comma-separated, in the order sent) and
`media_tokens` (the prompt tokens `--media-tokens` says the media cost; None without the rule). All None (and
"") for a request without media, and in runs made before these existed.
A load run also stores each request's intended send time (`intended_send_ns`, the schedule's) beside the
actual one (`send_ns`), so queueing inside the client is never hidden (docs/scenarios.md, "load").
"""

from __future__ import annotations

import msgspec


class ToolCall(msgspec.Struct, kw_only=True):
    """One tool call of an answer, its streamed pieces joined."""

    name: str = ""
    arguments: str = ""  # JSON text, as the model wrote it
    id: str | None = None


class MediaCounts(msgspec.Struct, kw_only=True, frozen=True):
    """A request's media as its record keeps them (`RequestRecord.media_*`, `images`, ...)."""

    images: int = 0
    video_frames: int = 0
    audio_s: float = 0.0
    pixels: int = 0
    bytes: int = 0
    hashes: str = ""
    tokens: int | None = None

    def apply(self, record: RequestRecord) -> None:
        """Set `record`'s media fields to these."""
        record.images = self.images
        record.video_frames = self.video_frames
        record.audio_s = self.audio_s
        record.media_pixels = self.pixels
        record.media_bytes = self.bytes
        record.media_hashes = self.hashes
        record.media_tokens = self.tokens


class RequestRecord(msgspec.Struct, kw_only=True):
    request_id: str
    endpoint: str
    scenario: str = ""
    family: str = ""
    prompt_id: str = ""
    concurrency: int = 1
    batch: int = 0
    repeat: int = 0
    ok: bool = False
    error_kind: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    finish_reason: str | None = None
    send_ns: int = 0
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    end_ns: int = 0
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    client_output_tokens: int | None = None
    cached_tokens: int | None = (
        None  # usage.prompt_tokens_details.cached_tokens: its prompt tokens the engine had cached
    )
    num_chunks: int = 0
    num_heartbeats: int = 0
    chunk_usage: bool = True
    # open-loop load (scenario `load`); None elsewhere, and in runs made before these existed
    intended_send_ns: int | None = None  # when the schedule meant to send it
    dispatch_ns: int | None = None  # when the schedule released it, before any --max-concurrency wait
    planned_input_tokens: int | None = None  # the prompt length it was built to, the engine's overhead included
    planned_output_tokens: int | None = None  # max_tokens asked
    worker: int = 0  # which load-generating process sent it
    model: str = ""  # the model (or adapter) the body asked for, where the scenario records it (load)
    vectors: int | None = None  # the vectors an embeddings request returned, the scores a rerank one did
    # a disaggregated pair behind loadproof's relay (its answer's headers): the prefill hop, the KV bytes written
    prefill_hop_ns: int | None = None
    kv_bytes: int | None = None
    # media sent (multimodal load): counts, sizes and digests, never the bytes; None without media
    images: int | None = None
    video_frames: int | None = None
    audio_s: float | None = None
    media_pixels: int | None = None
    media_bytes: int | None = None
    media_hashes: str = ""
    media_tokens: int | None = None  # the prompt tokens --media-tokens implies for them
    output_text: str = ""  # the answer (reasoning apart, in reasoning_text)
    # reasoning models, tool calls, checked answers (None, empty: none streamed or not checked)
    first_answer_ns: int | None = None
    reasoning_tokens: int | None = None
    engine_reasoning_tokens: int | None = None
    reasoning_text: str = ""
    tool_calls: list[ToolCall] = []
    output_valid: bool | None = None
    output_invalid_reason: str | None = None
    chunk_ns: list[int] = []
    chunk_tokens: list[int] = []

    @property
    def ttft_ns(self) -> int | None:
        return None if self.first_token_ns is None else self.first_token_ns - self.send_ns

    @property
    def ttfa_ns(self) -> int | None:
        """Send to the first answer token (after any reasoning): the wait a reader of the answer sees."""
        return None if self.first_answer_ns is None else self.first_answer_ns - self.send_ns

    @property
    def answer_tokens(self) -> int | None:
        """Output tokens that were not reasoning."""
        if self.output_tokens is None:
            return None
        return self.output_tokens - (self.reasoning_tokens or 0)

    @property
    def latency_ns(self) -> int | None:
        """Send to last token: `latency_ns - ttft_ns == sum(itl_ns())` holds by construction."""
        return None if self.last_token_ns is None else self.last_token_ns - self.send_ns

    def itl_ns(self) -> list[int]:
        """Gaps between successive token-bearing chunks, from the first token on."""
        if self.first_token_ns is None:
            return []
        times = [t for t in self.chunk_ns if t >= self.first_token_ns]
        return [b - a for a, b in zip(times, times[1:])]
