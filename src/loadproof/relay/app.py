"""The relay: an OpenAI-compatible streaming reverse proxy built for million-token prompts.

It forwards the path of every registered route adapter (protocol.routes: completions, chat, the Responses and
Messages APIs, embeddings, rerank, transcriptions, a plug-in's), `/v1/models`, the engine's `/tokenize`,
`/detokenize` and `/version`, and serves the engine's own `/metrics` as `/engine/metrics` (never on its own
`/metrics`, which holds only the relay's figures); `/health` and `/metrics` are its own.

What it guarantees, and why (the relays people put in front of engines get each of these wrong):
- the upstream comes from config only, never from a request;
- bounded concurrency: a request beyond the pool gets an immediate 429, never a hang. The slot is taken
  before the body is read, so N slow uploads hold N slots, and it is released on every path (success,
  upstream error, deadline, body timeout, client disconnect, streamed or not);
- a total deadline per request, independent of any idle timeout (default: an hour), and a bound on the
  time the body may take to arrive (`body_timeout_s`, never past the deadline): 408 after it;
- streams get their response headers as soon as the engine's arrive, then a heartbeat whenever the engine
  has been silent for `heartbeat_s`, only between events (vLLM sends nothing during queueing and
  prefill, and 60 s idle timeouts cut long prompts). The heartbeat is a blank line
  (protocol.sse.HEARTBEAT), measured invisible to the clients people use; a `:` comment broke
  `vllm bench serve` on every request;
- an upstream failure after the stream started becomes an in-band error event and a clean end of the
  stream; before the first byte it becomes a proper HTTP error (502, or 504 for the deadline). An
  engine's own in-band error event passes through untouched and is logged `upstream_error_event`;
- when the client leaves (streaming, waiting for a non-streamed answer, or still uploading), the upstream
  connection is closed at once, so the engine aborts the request and frees its KV cache;
- API keys compared in constant time, on the API, on /metrics and on /engine/metrics; a request body size
  limit; logs that hold no key, no prompt and no upstream address.

It speaks HTTP/1.1 itself on asyncio protocols (relay.http the framing, relay.upstream the engine's side,
relay.connection a client's side and relay.exchange the answer to its request, relay.state what they share), one timer for all timeouts and heartbeats: Starlette on uvicorn with aiohttp to the upstream reached 0.46-0.73x nginx's throughput
with +25 to +45 ms p99 per chunk at 64 streams, the time going to the framework's per-request and
per-chunk layers (docs/relay-and-supervisor.md has the profile).
"""

from __future__ import annotations

import asyncio
import logging

from loadproof.relay.config import RelayConfig
from loadproof.relay.connection import ClientConnection
from loadproof.relay.http import internal_error
from loadproof.relay.state import RelayState

__all__ = ["Relay", "RelayConfig"]

log = logging.getLogger("loadproof.relay")
_INF = float("inf")


class Relay(RelayState):
    """The relay's server: accepts client connections, runs the one timer, and stops cleanly."""

    def __init__(self, config: RelayConfig) -> None:
        super().__init__(config)
        self._server: asyncio.AbstractServer | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._tick_s = max(0.01, min(0.1, config.heartbeat_s / 4))

    @property
    def in_flight(self) -> int:
        return self.metrics.in_flight

    async def start(self, host: str, port: int) -> None:
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(lambda: ClientConnection(self), host, port, backlog=4096)
        self._ticker = self.loop.call_later(self._tick_s, self._tick)

    async def stop(self, drain_s: float | None = None) -> None:
        """Stop accepting; let requests in flight end (for `drain_s` at most, None: however long); then
        close every connection (upstreams too, so the engine aborts what is left)."""
        assert self.loop is not None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            if conn.idle():
                conn.close()
        until = self.loop.time() + drain_s if drain_s is not None else _INF
        while self.metrics.in_flight and self.loop.time() < until:
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            conn.shut_down()  # what is still in flight ends with an explicit error, not a silent cut
        self.pool.close_all()
        if self._ticker is not None:
            self._ticker.cancel()
        await asyncio.sleep(0)  # let the closed transports report
        for handler in log.handlers:
            handler.flush()

    def _tick(self) -> None:
        assert self.loop is not None
        now = self.loop.time()
        for conn in list(self.connections):
            try:
                conn.tick(now)
            except Exception as exc:
                internal_error(exc)
                conn.abort()
        for handler in log.handlers:  # access lines are written in batches (relay.serve.BatchedLineHandler)
            handler.flush()
        self._ticker = self.loop.call_later(self._tick_s, self._tick)
