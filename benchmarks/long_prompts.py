"""Benchmark: how long loadproof's client takes to send very long prompts, and how that grows with size.

    scripts/in-venv python benchmarks/long_prompts.py [--sessions 24] [--sizes 100000,300000,1000000]

SESSIONS chat requests go out together, each carrying a prompt of exactly N tokens of the embedded
model's tokenizer (built by the haystack builder, about 5 bytes a token), to a small aiohttp server in
its own process that reads the whole body, discards it and answers a 4-chunk SSE stream. The server
stamps the moment each body is complete on the machine-wide monotonic clock, so the client's send time
is measured per request: upload = body complete at the server - request start at the client. Also per
request: time to first token at the client (upload, then the server's answer). The same bodies then go
through a plain aiohttp post, as the reference; one untimed round goes first, so that neither client
pays for the server's first intake of that much data. Peers are not run here: none of them has a mode that
sends a given 1M-token text without tokenizing it first. It prints what it measured; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import aiohttp
from tokenizers import Tokenizer

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines.embedded import paths
from loadproof.engines.process import free_port
from loadproof.protocol.openai import request_body
from loadproof.workloads.haystack import HaystackBuilder

SERVER = r'''
import json, re, sys, time
from aiohttp import web
LOG = {}
MODEL = re.compile(rb'"model":"([^"]+)"')
async def chat(request):
    start = time.perf_counter_ns()
    body = await request.read()
    done = time.perf_counter_ns()
    LOG[MODEL.search(body[:200]).group(1).decode()] = [start, done, len(body)]
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"}); await resp.prepare(request)
    for i in range(4):
        await resp.write(b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": " ok"}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": i + 1}}).encode() + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    return resp
async def log(request):
    out = dict(LOG); LOG.clear(); return web.json_response(out)
app = web.Application(client_max_size=1 << 30)
app.router.add_post("/v1/chat/completions", chat); app.router.add_get("/log", log)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
'''


def build_bodies(sessions: int, tokens: int, builder: HaystackBuilder, tag: str) -> dict[str, bytes]:
    """{model name: body}; the server tells the requests apart by the model name."""
    names = [f"{tag}-{i}" for i in range(sessions)]
    return {name: request_body("chat", name, builder.build(name, tokens).text, max_tokens=4) for name in names}


async def send_loadproof(url: str, bodies: dict[str, bytes]) -> dict[str, tuple[int, int]]:
    """Every body at once through StreamingClient: {model name: (send_ns, first_token_ns)}."""
    async with StreamingClient(url, max_connections=len(bodies), keep_text=False) as client:
        records = await asyncio.gather(*(client.stream(RequestSpec(k, "chat", b)) for k, b in bodies.items()))
    for rec in records:
        assert rec.ok, rec.error_message
    return {rec.request_id: (rec.send_ns, rec.first_token_ns or 0) for rec in records}


async def send_plain(url: str, bodies: dict[str, bytes]) -> dict[str, tuple[int, int]]:
    """The same with a plain aiohttp post: time to the first body byte."""
    connector = aiohttp.TCPConnector(limit=len(bodies))
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(name: str, body: bytes) -> tuple[str, tuple[int, int]]:
            t0 = time.perf_counter_ns()
            async with session.post(url + "/v1/chat/completions", data=body,
                                    headers={"Content-Type": "application/json"}) as resp:
                await resp.content.readany()
                first = time.perf_counter_ns()
                await resp.read()
            return name, (t0, first)

        return dict(await asyncio.gather(*(one(k, b) for k, b in bodies.items())))


def summarize(sent: dict[str, tuple[int, int]], log: dict[str, list[int]], tokens: int) -> dict[str, float]:
    uploads = [(log[k][1] - s) / 1e9 for k, (s, _) in sent.items()]
    ttfts = [(f - s) / 1e9 for s, f in sent.values()]
    total_bytes = sum(v[2] for v in log.values())
    span_s = (max(v[1] for v in log.values()) - min(s for s, _ in sent.values())) / 1e9
    return {"tokens": tokens, "mb_per_body": total_bytes / len(log) / 1e6, "upload_p50_s": statistics.median(uploads),
            "upload_max_s": max(uploads), "ttft_p50_s": statistics.median(ttfts), "ttft_max_s": max(ttfts),
            "all_sent_s": span_s, "mb_per_s": total_bytes / 1e6 / span_s}


def measure(sessions: int, sizes: list[int]) -> list[dict[str, object]]:
    tokenizer = Tokenizer.from_file(str(paths().model_dir / "tokenizer.json"))
    builder = HaystackBuilder(tokenizer, overhead_tokens=1, seed=731)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    url = f"http://127.0.0.1:{port}"
    rows: list[dict[str, object]] = []
    try:
        _wait(url)
        for tokens in sizes:
            bodies = build_bodies(sessions, tokens, builder, f"t{tokens}")
            asyncio.run(send_plain(url, bodies))  # untimed: the server's first intake of this size grows its memory
            urllib.request.urlopen(url + "/log", timeout=30).read()
            for name, fn in (("loadproof", send_loadproof), ("plain aiohttp", send_plain)):
                sent = asyncio.run(fn(url, bodies))
                log = json.loads(urllib.request.urlopen(url + "/log", timeout=30).read())
                row = {"client": name, "sessions": sessions, **summarize(sent, log, tokens)}
                rows.append(row)
                print(f"{name:14s} {sessions} x {tokens:>9,} tokens ({row['mb_per_body']:.1f} MB each): upload p50 "
                      f"{row['upload_p50_s']:.3f} s, max {row['upload_max_s']:.3f} s; first token p50 "
                      f"{row['ttft_p50_s']:.3f} s, max {row['ttft_max_s']:.3f} s; all {sessions} sent in "
                      f"{row['all_sent_s']:.2f} s ({row['mb_per_s']:,.0f} MB/s)", flush=True)
            del bodies
    finally:
        server.terminate()
        server.wait()
    return rows


def _wait(url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/log", timeout=1)
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the discard server at {url} did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--sizes", default="100000,300000,1000000")
    args = parser.parse_args()
    if not (paths().model_dir / "tokenizer.json").is_file():
        raise SystemExit("no embedded tokenizer: run `loadproof serve --embedded` once")
    measure(args.sessions, [int(x) for x in args.sizes.split(",")])


if __name__ == "__main__":
    main()
