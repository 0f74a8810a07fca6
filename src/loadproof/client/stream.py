"""The streaming client: sends one OpenAI-compatible request and times every chunk of its answer.

Built for speed, because a load generator that is itself the bottleneck measures the client: one
shared aiohttp session, a large read buffer (vLLM #39963: a 64 KB buffer collapsed throughput at long
context), reads taken as they come (`readany`), one timestamp per read, and per event only a
msgspec decode of the few fields we need. Every request ends in exactly one RequestRecord handed to
`on_record` (finished, failed or cancelled), so an interrupted run still stores what it measured;
`on_start` is handed each record as its request is sent (a live view watches it fill).

What is sent and how its answer is read is the route's (`protocol.routes`, named by the spec's `endpoint`): the
client posts the body, splits the stream into events and hands each to the route's `feed`, which fills one
`Reading` whatever the API. A pooling route's answer (embeddings, rerank) is one JSON body, read whole: its
first and last token are the body's arrival, and it has no output tokens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec

from loadproof.errors import Disconnected, HTTPStatusError, RequestError, RequestTimeout
from loadproof.protocol.openai import KV_BYTES_HEADER, PREFILL_S_HEADER
from loadproof.protocol.routes import Route, route_of
from loadproof.protocol.routes.reading import Reading
from loadproof.protocol.sse import SSEDecoder
from loadproof.protocol.urls import url_of
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S as NS

Clock = Callable[[], int]
READ_BUFSIZE_BYTES = 4 * 1024 * 1024


@dataclass(slots=True)
class RequestSpec:
    """What to send: `body` as its route (`endpoint`, a name of `protocol.routes`) encoded it, and `headers` of
    its own beside the route's (a session's id, for a router's affinity)."""

    request_id: str
    endpoint: str
    body: bytes
    deadline_s: float | None = None
    labels: dict[str, Any] | None = None
    headers: dict[str, str] | None = None


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
        self._base_url = base_url
        self.urls: dict[str, str] = {}  # by route name, as each is first used
        self._headers: dict[str, str] = {}
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

    def _url(self, route: Route) -> str:
        url = self.urls.get(route.name)
        if url is None:
            url = self.urls[route.name] = url_of(self._base_url, route.path)
        return url

    async def _stream_into(self, record: RequestRecord, spec: RequestSpec) -> None:
        assert self._session is not None, "use StreamingClient as an async context manager"
        route = route_of(spec.endpoint)
        url = self._url(route)
        headers = {"Content-Type": route.content_type, **route.headers}
        if spec.headers:  # the request's own never override the route's
            headers = {**spec.headers, **headers}
        record.send_ns = self._clock()
        try:
            async with self._session.post(url, data=spec.body, headers=headers) as resp:
                record.http_status = resp.status
                if resp.status != 200:
                    text = (await resp.read()).decode("utf-8", "replace")
                    raise HTTPStatusError(resp.status, _short_error(text))
                _prefill_hop(record, resp.headers)
                if route.streams:
                    await self._read_stream(record, resp.content, route)
                else:
                    body = await resp.read()
                    record.end_ns = self._clock()
                    route.answer(record, body)
        except aiohttp.ClientConnectionError as exc:
            raise Disconnected(f"connection lost: {exc.__class__.__name__}: {exc}") from None
        except aiohttp.ClientPayloadError as exc:
            raise Disconnected(f"stream broken: {exc}") from None

    async def _read_stream(self, record: RequestRecord, content: aiohttp.StreamReader, route: Route) -> None:
        """The hot loop of a run (one pass per read): the route's reader takes each event, the record is
        written live once per read (a live view reads it while the stream runs) and whole at the end."""
        clock = self._clock
        decoder = SSEDecoder()
        reading = Reading(self._keep_text)
        record.chunk_ns, record.chunk_tokens = reading.chunk_ns, reading.chunk_tokens  # filled live
        feed_all = route.feed_all
        done_payload = route.done_payload
        try:
            while True:
                data = await content.readany()
                if not data:
                    break
                now = clock()
                feed_all(reading, decoder.feed(data), now)
                reading.live(record)
        finally:
            record.end_ns = clock()
            record.num_heartbeats = decoder.num_heartbeats
            reading.into(record)
        if not reading.done:
            tail = decoder.pending.decode("utf-8", "replace").strip()
            end = "[DONE]" if done_payload is not None else "its end event"
            raise Disconnected(f"stream ended before {end}" + (f" (last bytes: {tail[:200]!r})" if tail else ""))


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
