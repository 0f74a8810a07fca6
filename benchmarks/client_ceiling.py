"""Benchmark: how many streamed responses per second loadproof's client consumes, against plain loops.

    scripts/in-venv python benchmarks/client_ceiling.py --url http://127.0.0.1:8088 [--concurrency 64]
        [--requests 2000]

The server must never be the bottleneck: serve a pre-built SSE body of 256 vLLM-shaped chunks with
nginx (see `serve_static_sse.sh` beside this file). Three clients run in this one process, one after the
other, on one core's worth of event loop:
- raw: one aiohttp session reading every body as it arrives and discarding it (no parsing at all):
  the physical limit of an asyncio client on this machine;
- plain: one aiohttp session, `iter_any()` reads, split on blank lines, `json.loads` on every event
  (the loop the issue names as the reference);
- loadproof: `StreamingClient.stream`, with the full record (per-chunk times and usage tokens).
It prints what it measured and the ratios; it asserts nothing. `benchmarks/run_all.py` runs the peers
(`vllm bench serve`, GuideLLM, AIPerf) beside these.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from loadproof.client import RequestSpec, StreamingClient
from loadproof.protocol.openai import request_body

CHUNKS_PER_BODY = 256  # token-bearing chunks in serve_static_sse.sh's body
# what the peers send too: a chat request for 128 tokens with a prompt of about 128 tokens
BODY = request_body("chat", "static", "a haystack sentence " * 32, max_tokens=128)


async def consume(base: str, concurrency: int, total: int, **client_options: Any) -> tuple[float, int]:
    """`total` streamed responses from `base`/v1/chat/completions through StreamingClient (with
    `client_options`), `concurrency` at a time; returns (seconds, token-bearing chunks). Shared with
    relay_overhead.py, multi_worker.py and live_view_cost.py."""
    chunks = 0
    queue = iter(range(total))
    async with StreamingClient(base, max_connections=concurrency, **client_options) as client:

        async def worker() -> None:
            nonlocal chunks
            for i in queue:
                rec = await client.stream(RequestSpec(request_id=str(i), endpoint="chat", body=BODY))
                assert rec.ok, rec.error_message
                chunks += len(rec.chunk_ns)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0, chunks


async def run_loadproof(url: str, concurrency: int, total: int) -> tuple[float, int]:
    return await consume(url, concurrency, total)


async def run_plain(url: str, concurrency: int, total: int) -> tuple[float, int]:
    chunks = 0
    queue = iter(range(total))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal chunks
            for _ in queue:
                async with session.post(url + "/v1/chat/completions", data=BODY) as resp:
                    buf = b""
                    async for data in resp.content.iter_any():
                        buf += data
                        *events, buf = buf.split(b"\n\n")
                        for event in events:
                            payload = event[6:]
                            if payload != b"[DONE]" and json.loads(payload)["choices"]:
                                chunks += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0, chunks


async def run_raw(url: str, concurrency: int, total: int) -> tuple[float, int]:
    """Read and discard: no SSE split, no JSON, no timestamps. Chunks are counted as 256 per body."""
    queue = iter(range(total))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, read_bufsize=4 << 20) as session:

        async def worker() -> None:
            for _ in queue:
                async with session.post(url + "/v1/chat/completions", data=BODY) as resp:
                    while await resp.content.readany():
                        pass

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0, total * CHUNKS_PER_BODY


CLIENTS: dict[str, Callable[[str, int, int], Awaitable[tuple[float, int]]]] = {
    "raw aiohttp read (no parsing)": run_raw,
    "plain aiohttp + json.loads": run_plain,
    "loadproof StreamingClient": run_loadproof,
}


def measure(name: str, url: str, concurrency: int, requests: int) -> tuple[float, int]:
    """One warm-up round (connections, caches), then the measured one: (seconds, chunks)."""
    fn = CLIENTS[name]
    asyncio.run(fn(url, concurrency, concurrency))
    return asyncio.run(fn(url, concurrency, requests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL; the body is served at /v1/chat/completions")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    results = {}
    for name in CLIENTS:
        seconds, chunks = measure(name, args.url, args.concurrency, args.requests)
        results[name] = args.requests / seconds
        print(
            f"{name:30s} {args.requests / seconds:8.0f} responses/s  {chunks / seconds:10.0f} chunks/s  "
            f"({args.requests} responses at concurrency {args.concurrency} in {seconds:.2f} s)"
        )
    raw, plain, ours = results.values()
    print(f"ratio loadproof / plain: {ours / plain:.2f}; loadproof / raw read: {ours / raw:.2f}")


if __name__ == "__main__":
    main()
