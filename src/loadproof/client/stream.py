"""The streaming client: sends one OpenAI-compatible request and times every chunk of its answer.

Built for speed, because a load generator that is itself the bottleneck measures the client: one
shared aiohttp session, a large read buffer (vLLM #39963: a 64 KB buffer collapsed throughput at long
context), reads taken as they come (`readany`), one timestamp per read, and per event only a
msgspec decode of the few fields we need. Every request ends in exactly one RequestRecord handed to
`on_record` (finished, failed or cancelled), so an interrupted run still stores what it measured;
`on_start` is handed each record as its request is sent (a live view watches it fill).

An embeddings request (`endpoint` "embeddings") is not streamed: its answer is one JSON body, read whole.
Its first and last token are the body's arrival (the time the vectors are there), its `prompt_tokens`
the usage's and its `vectors` the vectors returned; it has no output tokens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec

from loadproof.errors import Disconnected, HTTPStatusError, RequestError, RequestTimeout, StreamError
from loadproof.protocol.openai import (
    KV_BYTES_HEADER,
    PATHS,
    PREFILL_S_HEADER,
    EmbeddingsAnswer,
    ToolCallDelta,
    chunk_decoder,
    embeddings_decoder,
    error_message,
    rerank_decoder,
)
from loadproof.protocol.sse import DONE, SSEDecoder
from loadproof.protocol.urls import url_of
from loadproof.records import POOLING, RequestRecord, ToolCall
from loadproof.units import NS_PER_S as NS

Clock = Callable[[], int]
READ_BUFSIZE_BYTES = 4 * 1024 * 1024


@dataclass(slots=True)
class RequestSpec:
    """What to send. `body` is the encoded JSON (see `protocol.openai.request_body`)."""

    request_id: str
    endpoint: str
    body: bytes
    deadline_s: float | None = None
    labels: dict[str, Any] | None = None


class StreamingClient:
    """Use as `async with StreamingClient(url) as client: record = await client.stream(spec)`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        max_connections: int = 1024,
        connect_timeout_s: float = 30.0,
        clock: Clock = time.perf_counter_ns,
        on_record: Callable[[RequestRecord], None] | None = None,
        on_start: Callable[[RequestRecord], None] | None = None,
        keep_text: bool = True,
    ) -> None:
        self.urls = {endpoint: url_of(base_url, path) for endpoint, path in PATHS.items()}
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._max_connections = max_connections
        self._connect_timeout_s = connect_timeout_s
        self._clock = clock
        self._on_record = on_record
        self._on_start = on_start
        self._keep_text = keep_text
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> StreamingClient:
        connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout_s),
            read_bufsize=READ_BUFSIZE_BYTES,
            headers=self._headers,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def stream(self, spec: RequestSpec, record: RequestRecord | None = None) -> RequestRecord:
        """Send one streaming request; return its record (never raises for a failed request).

        Pass `record` to watch it fill while the stream runs (chunk times and tokens are appended live).
        """
        if record is None:
            record = RequestRecord(request_id=spec.request_id, endpoint=spec.endpoint)
        if spec.labels:
            for key, value in spec.labels.items():
                setattr(record, key, value)
        if self._on_start is not None:
            self._on_start(record)
        try:
            if spec.deadline_s is None:
                await self._stream_into(record, spec)
            else:
                try:
                    async with asyncio.timeout(spec.deadline_s):
                        await self._stream_into(record, spec)
                except TimeoutError:
                    raise RequestTimeout(f"no complete answer within {spec.deadline_s:g} s") from None
            record.ok = True
        except RequestError as exc:
            record.error_kind = exc.kind
            record.error_message = str(exc)
            record.http_status = getattr(exc, "status", record.http_status)
        except asyncio.CancelledError:
            record.error_kind = "cancelled"
            record.error_message = "cancelled by the client"
            record.end_ns = self._clock()
            self._emit(record)
            raise
        if not record.end_ns:
            record.end_ns = self._clock()
        self._emit(record)
        return record

    def _emit(self, record: RequestRecord) -> None:
        if self._on_record is not None:
            self._on_record(record)

    async def _stream_into(self, record: RequestRecord, spec: RequestSpec) -> None:
        assert self._session is not None, "use StreamingClient as an async context manager"
        clock = self._clock
        url = self.urls[spec.endpoint]
        record.send_ns = clock()
        try:
            async with self._session.post(url, data=spec.body) as resp:
                record.http_status = resp.status
                if resp.status != 200:
                    text = (await resp.read()).decode("utf-8", "replace")
                    raise HTTPStatusError(resp.status, _short_error(text))
                _prefill_hop(record, resp.headers)
                if spec.endpoint in POOLING:
                    await self._read_whole(record, resp, spec.endpoint)
                else:
                    await self._read_stream(record, resp.content)
        except aiohttp.ClientConnectionError as exc:
            raise Disconnected(f"connection lost: {exc.__class__.__name__}: {exc}") from None
        except aiohttp.ClientPayloadError as exc:
            raise Disconnected(f"stream broken: {exc}") from None

    async def _read_whole(self, record: RequestRecord, resp: aiohttp.ClientResponse, endpoint: str) -> None:
        """An embeddings or rerank answer: one JSON body; its arrival is the first and the last token."""
        body = await resp.read()
        now = record.end_ns = self._clock()
        try:
            answer = (embeddings_decoder if endpoint == "embeddings" else rerank_decoder).decode(body)
        except msgspec.DecodeError as exc:
            raise StreamError(f"undecodable answer: {exc}") from None
        message = error_message(answer)
        if message is not None:
            raise StreamError(message)
        items = answer.data if isinstance(answer, EmbeddingsAnswer) else answer.results
        if not items:
            raise StreamError("the answer holds no " + ("vector" if endpoint == "embeddings" else "score"))
        record.first_token_ns = record.last_token_ns = now
        record.num_chunks = 1
        record.chunk_usage = False
        record.vectors = len(items)
        record.output_tokens = 0
        if answer.usage is not None:
            record.prompt_tokens = answer.usage.prompt_tokens

    async def _read_stream(self, record: RequestRecord, content: aiohttp.StreamReader) -> None:
        # The hot loop of a run (one pass per event): locals and bound methods, no per-event record writes.
        clock = self._clock
        decoder = SSEDecoder()
        decode = chunk_decoder.decode
        keep_text = self._keep_text
        texts: list[str] = []
        reasoning_texts: list[str] = []
        calls: dict[int, ToolCall] = {}
        chunk_ns = record.chunk_ns = []
        chunk_tokens = record.chunk_tokens = []
        add_ns, add_tokens, add_text = chunk_ns.append, chunk_tokens.append, texts.append
        prev_tokens = 0
        reasoning_tokens = 0
        num_chunks = 0
        first_ns = last_ns = answer_ns = None
        per_chunk_usage = True
        done = False
        try:
            while True:
                data = await content.readany()
                if not data:
                    break
                now = clock()
                for payload in decoder.feed(data):
                    if payload == DONE:
                        done = True
                        continue
                    try:
                        chunk = decode(payload)
                    except msgspec.DecodeError as exc:
                        raise StreamError(f"undecodable event: {exc}") from None
                    num_chunks += 1
                    usage = chunk.usage
                    tokens = 0
                    if usage is not None and usage.completion_tokens is not None:
                        tokens = usage.completion_tokens - prev_tokens
                        prev_tokens = usage.completion_tokens
                        if usage.prompt_tokens is not None:
                            record.prompt_tokens = usage.prompt_tokens
                        details = usage.prompt_tokens_details
                        if details is not None and details.cached_tokens is not None:
                            record.cached_tokens = details.cached_tokens
                        if usage.completion_tokens_details is not None:
                            record.engine_reasoning_tokens = usage.completion_tokens_details.reasoning_tokens
                    choices = chunk.choices
                    if not choices:
                        message = error_message(chunk)
                        if message is not None:
                            raise StreamError(message)
                        continue
                    if usage is None:
                        per_chunk_usage = False
                    choice = choices[0]
                    delta = choice.delta
                    reasoning = None
                    called = False  # the chunk carries a piece of a tool call: answer, as content is
                    if delta is None:
                        piece = choice.text
                    else:
                        piece = delta.content
                        reasoning = delta.reasoning_content or delta.reasoning
                        if delta.tool_calls:
                            _add_tool_calls(calls, delta.tool_calls)
                            called = True
                    if choice.finish_reason is not None:
                        record.finish_reason = choice.finish_reason
                    if piece or reasoning or called:
                        if first_ns is None:
                            first_ns = record.first_token_ns = now
                        if piece or called:
                            if answer_ns is None:
                                answer_ns = now
                            if piece and keep_text:
                                add_text(piece)
                        else:
                            reasoning_tokens += tokens
                        if reasoning and keep_text:
                            reasoning_texts.append(reasoning)
                        last_ns = now
                        add_ns(now)
                        add_tokens(tokens)
                    elif tokens > 0:
                        last_ns = now
                        add_ns(now)
                        add_tokens(tokens)
                # live, once per read (a live view reads them while the stream runs; output_tokens is the
                # usage so far, and gets its final value below)
                record.last_token_ns, record.num_chunks, record.output_tokens = last_ns, num_chunks, prev_tokens
        finally:
            record.end_ns = clock()
            record.num_chunks = num_chunks
            record.last_token_ns = last_ns
            record.num_heartbeats = decoder.num_heartbeats
            record.chunk_usage = per_chunk_usage
            record.output_text = "".join(texts)
            record.output_tokens = prev_tokens if prev_tokens or record.prompt_tokens is not None else None
            record.first_answer_ns = answer_ns
            if reasoning_texts or reasoning_tokens:
                record.reasoning_text = "".join(reasoning_texts)
                record.reasoning_tokens = reasoning_tokens if per_chunk_usage else None
            if calls:
                record.tool_calls = [calls[i] for i in sorted(calls)]
        if not done:
            tail = decoder.pending.decode("utf-8", "replace").strip()
            raise Disconnected("stream ended before [DONE]" + (f" (last bytes: {tail[:200]!r})" if tail else ""))


def _add_tool_calls(calls: dict[int, ToolCall], deltas: list[ToolCallDelta]) -> None:
    """Joins the streamed pieces of an answer's tool calls, by index (the id and name come once, the
    arguments in pieces)."""
    for d in deltas:
        call = calls.get(d.index)
        if call is None:
            call = calls[d.index] = ToolCall()
        if d.id:
            call.id = d.id
        if d.function is not None:
            if d.function.name:
                call.name += d.function.name
            if d.function.arguments:
                call.arguments += d.function.arguments


def _prefill_hop(record: RequestRecord, headers: Any) -> None:
    """What loadproof's relay measured of a disaggregated pair's prefill hop (protocol.openai's headers)."""
    seconds, written = headers.get(PREFILL_S_HEADER), headers.get(KV_BYTES_HEADER)
    try:
        if seconds is not None:
            record.prefill_hop_ns = round(float(seconds) * NS)
        if written is not None:
            record.kv_bytes = int(written)
    except ValueError:  # not ours after all: nothing recorded
        pass


def _short_error(text: str) -> str:
    """The message of an OpenAI-style error body, or the body's start."""
    try:
        data = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text.strip()[:300]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if data.get("message"):
            return str(data["message"])[:300]
    return text.strip()[:300]
