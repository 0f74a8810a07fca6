"""Benchmark: how many streamed responses per second loadproof's client consumes, against a plain loop.

    scripts/in-venv python benchmarks/client_ceiling.py --url http://127.0.0.1:8088 [--concurrency 64]
        [--requests 2000]

The server must never be the bottleneck: serve a pre-built SSE body of 256 vLLM-shaped chunks with
nginx (see `serve_static_sse.sh` beside this file). Both clients run in this one process, one after the
other, on one core's worth of event loop:
- loadproof: `StreamingClient.stream`, with the full record (per-chunk times and usage tokens);
- plain: one aiohttp session, `iter_any()` reads, split on blank lines, `json.loads` on every event
  (the loop the issue names as the reference, about 960 responses/s on this kind of machine).
It prints what it measured and the ratio; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp

from loadproof.client import RequestSpec, StreamingClient


async def consume(base: str, concurrency: int, total: int) -> tuple[float, int]:
    """`total` streamed responses from `base`/v1/chat/completions through StreamingClient, `concurrency`
    at a time; returns (seconds, chunks). Shared with relay_overhead.py."""
    chunks = 0
    queue = iter(range(total))
    async with StreamingClient(base, max_connections=concurrency) as client:

        async def worker() -> None:
            nonlocal chunks
            for i in queue:
                rec = await client.stream(RequestSpec(request_id=str(i), endpoint="chat", body=b"{}"))
                assert rec.ok, rec.error_message
                chunks += rec.num_chunks

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
                async with session.post(url + "/v1/chat/completions", data=b"{}") as resp:
                    buf = b""
                    async for data in resp.content.iter_any():
                        buf += data
                        *events, buf = buf.split(b"\n\n")
                        for event in events:
                            payload = event[6:]
                            if payload != b"[DONE]":
                                json.loads(payload)
                                chunks += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0, chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL; the body is served at /v1/chat/completions")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    results = {}
    for name, fn in (("plain aiohttp + json.loads", run_plain), ("loadproof StreamingClient", run_loadproof)):
        asyncio.run(fn(args.url, args.concurrency, args.concurrency))  # warm-up: connections, caches
        seconds, chunks = asyncio.run(fn(args.url, args.concurrency, args.requests))
        results[name] = args.requests / seconds
        print(f"{name:28s} {args.requests / seconds:8.0f} responses/s  {chunks / seconds:10.0f} chunks/s  "
              f"({args.requests} responses at concurrency {args.concurrency} in {seconds:.2f} s)")
    plain, ours = results.values()
    print(f"ratio loadproof / plain: {ours / plain:.2f}")


if __name__ == "__main__":
    main()
