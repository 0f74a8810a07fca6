"""The relay as a disaggregated prefill/decode proxy: a generation request goes first to the prefill instance
(the same body, one token, not streamed), then unchanged to the decode instance, which finds the prompt's KV
cache through the engines' KV connector and streams the answer.

What passes between the two is the connector's business. With vLLM's NixlConnector the prefill instance
answers `kv_transfer_params` (where its blocks are) and the proxy hands them to the decode instance in the
request, as vLLM's own proxy does; with ExampleConnector (a shared folder) nothing needs passing: the decode
instance finds the prompt's files by the prompt's token ids.

Each answer carries what the relay measured of its prefill hop, for the client to record:
`x-loadproof-prefill-s` (the relay sent the prefill request -> the prefill instance's answer arrived: its
queue, the prompt's prefill, the connector's save) and, where the relay knows the connector's folder,
`x-loadproof-kv-bytes` (the bytes of the files the connector wrote for this prompt).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from loadproof.protocol.openai import KV_BYTES_HEADER, PREFILL_S_HEADER, error_body
from loadproof.protocol.routes import TEXT, route_of
from loadproof.relay.upstream import UpstreamConnection, UpstreamPool

# the hop's routes: text generation on the completions and chat APIs, as vLLM's own proxy takes (another route's
# request goes straight to the decode instance, which then prefills it itself)
GENERATION_PATHS = tuple(route_of(name).path for name in TEXT)
KV_CONNECTORS = ("ExampleConnector", "NixlConnector")  # what the hop knows how to pass on
# NixlConnector's request to the prefill instance: keep the blocks for a remote decode (vLLM's toy proxy)
_NIXL_PREFILL = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}
# ExampleConnector names a prompt's folder by the md5 of its token ids (int64), cut to whole blocks of the engine's
# block size: `serve` passes it (`--kv-block-size`, from the profile); a relay started by hand without it tries these
GUESSED_BLOCK_SIZES = (16, 32, 64, 128, 256, 8, 1)


@dataclass(frozen=True)
class PrefillConfig:
    upstream: str  # the prefill instance's base URL
    connector: str = "ExampleConnector"  # the engines' KV connector: what the hop passes on (module docstring)
    kv_storage: str | None = None  # ExampleConnector's shared folder: the relay reads the bytes written there
    block_size: int | None = None  # the engines' KV block size, which names a prompt's folder; None: guessed


@dataclass(frozen=True)
class PrefillOutcome:
    """The decode instance's body and the headers for the client; or, when the prefill failed, the answer."""

    body: bytes = b""
    headers: bytes = b""
    answer: tuple[int, bytes, str] | None = None  # status, body, outcome


class PrefillHop:
    def __init__(self, config: PrefillConfig, keepalive_s: float, upstream_fields: str) -> None:
        self.config = config
        self.pool = UpstreamPool(config.upstream, keepalive_s)
        self._fields = upstream_fields
        self.requests = 0
        self.failures = 0
        self.seconds = 0.0
        self.kv_bytes = 0

    async def run(self, path: str, body: bytes, loop: asyncio.AbstractEventLoop) -> PrefillOutcome:
        """Prefill `body` on the prefill instance; the decode instance's body and the client's headers."""
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):  # the decode instance says what is wrong with it
            return PrefillOutcome(body=body)
        self.requests += 1
        prefill = prefill_body(request, path, self.config)
        started = loop.time()
        try:
            status, answer = await self._post(path, prefill, loop)
        except (TimeoutError, OSError, ConnectionError) as exc:
            self.failures += 1
            return PrefillOutcome(
                answer=(
                    502,
                    error_body(f"prefill instance unreachable ({type(exc).__name__})", "upstream_error", 502),
                    "prefill_unreachable",
                )
            )
        seconds = loop.time() - started
        if status != 200:
            self.failures += 1
            return PrefillOutcome(answer=(status, answer, "prefill_status"))
        self.seconds += seconds
        headers = b"%s: %.6f\r\n" % (PREFILL_S_HEADER.encode(), seconds)
        try:
            reply = json.loads(answer)
        except ValueError:
            reply = {}
        if not isinstance(reply, dict):
            reply = {}
        params = reply.get("kv_transfer_params")
        if isinstance(params, dict):
            body = json.dumps({**request, "kv_transfer_params": params}).encode()
        if self.config.kv_storage is not None:
            written = stored_bytes(self.config.kv_storage, prompt_token_ids(reply), self.config.block_size)
            if written is not None:
                self.kv_bytes += written
                headers += b"%s: %d\r\n" % (KV_BYTES_HEADER.encode(), written)
        return PrefillOutcome(body=body, headers=headers)

    async def _post(self, path: str, body: bytes, loop: asyncio.AbstractEventLoop) -> tuple[int, bytes]:
        conn = self.pool.take(loop.time()) or await self.pool.connect()
        answer = _Collected(self.pool, loop)
        head = (
            f"POST {self.pool.target(path)} HTTP/1.1\r\nhost: {self.pool.host_header}\r\n{self._fields}"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode("latin-1")
        conn.send(head, body, answer)
        try:
            return await answer.done
        finally:
            if conn.handler is answer:  # cancelled (the client left): the engine sees the abort
                conn.detach()


def prefill_body(request: dict[str, Any], path: str, config: PrefillConfig) -> bytes:
    """The prefill instance's request: the same prompt and settings, one token, not streamed."""
    body = {k: v for k, v in request.items() if k not in ("stream_options", "min_tokens")}
    body.update(max_tokens=1, stream=False)
    if path == "/v1/chat/completions" and "max_completion_tokens" in body:
        body["max_completion_tokens"] = 1
    if config.connector == "NixlConnector":
        body["kv_transfer_params"] = dict(_NIXL_PREFILL)
    if config.kv_storage is not None:
        body["return_token_ids"] = True  # vLLM answers the prompt's token ids: which folder is this prompt's
    return json.dumps(body).encode()


def prompt_token_ids(reply: dict[str, Any]) -> list[int] | None:
    """The prompt's token ids in a vLLM answer asked with `return_token_ids` (chat: top level; completions:
    the choice)."""
    ids = reply.get("prompt_token_ids")
    if ids is None:
        choices = reply.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            ids = choices[0].get("prompt_token_ids")
    if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
        return ids
    return None


def stored_bytes(storage: str, token_ids: list[int] | None, block_size: int | None = None) -> int | None:
    """Bytes of the files ExampleConnector wrote for this prompt (its folder: the md5 of the token ids as
    int64, cut to whole blocks: (n - 1) // block * block of them, at the engines' `block_size`, or each of
    GUESSED_BLOCK_SIZES in turn where it is not known); None if no such folder is found."""
    if not token_ids:
        return None
    for block in (block_size,) if block_size else GUESSED_BLOCK_SIZES:
        keep = (len(token_ids) - 1) // block * block
        if keep <= 0:
            continue
        data = b"".join(i.to_bytes(8, "little", signed=True) for i in token_ids[:keep])
        folder = os.path.join(storage, hashlib.md5(data, usedforsecurity=False).hexdigest())
        try:
            with os.scandir(folder) as entries:
                return sum(e.stat().st_size for e in entries if e.is_file())
        except OSError:
            continue
    return None


class _Collected:
    """A whole answer from an upstream connection (UpstreamConnection's handler), as a future."""

    def __init__(self, pool: UpstreamPool, loop: asyncio.AbstractEventLoop) -> None:
        self.pool = pool
        self.loop = loop
        self.status = 0
        self.parts: list[bytes] = []
        self.done: asyncio.Future[tuple[int, bytes]] = loop.create_future()

    def upstream_head(self, status: int, headers: dict[str, str]) -> None:
        self.status = status

    def upstream_body(self, data: bytes) -> None:
        self.parts.append(data)

    def upstream_end(self, conn: UpstreamConnection) -> None:
        self.pool.put(conn, self.loop.time())
        if not self.done.done():
            self.done.set_result((self.status, b"".join(self.parts)))

    def upstream_lost(self, why: str) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(why))
