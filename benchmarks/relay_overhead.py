"""Benchmark: what the relay adds, per chunk and at the ceiling, against a direct connection and nginx.

    scripts/in-venv python benchmarks/relay_overhead.py [--streams 64,256]

Three paths to one upstream, measured in one run:
- direct: the client talks to the upstream;
- relay: `loadproof relay` in front of it (a subprocess);
- nginx: nginx as an SSE proxy (`proxy_buffering off`, from Debian's packages) in front of it.

Latency: the upstream (a small aiohttp server in a subprocess) streams 50 chunks, one every 20 ms,
each carrying its send time on the machine-wide monotonic clock; the client subtracts it from the
arrival time: added latency per chunk = arrival - send, p50 and p99 over every chunk of every stream.
Ceiling: the upstream sends 256 chunks as fast as it can; streamed chunks/s over all streams.
It prints what it measured and the ratios; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from client_ceiling import consume  # benchmarks/ is on sys.path when run as a script

from loadproof.engines.process import free_port

UPSTREAM = r"""
import asyncio, json, sys, time
from aiohttp import web
async def paced(request):
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"}); await resp.prepare(request)
    for i in range(50):
        await resp.write(b"data: " + json.dumps({"t": time.perf_counter_ns(), "choices": [{"text": "x"}],
                         "usage": {"completion_tokens": i + 1}}).encode() + b"\n\n")
        await asyncio.sleep(0.02)
    await resp.write(b"data: [DONE]\n\n"); return resp
BODY = b"".join(b"data: " + json.dumps({"choices": [{"index": 0, "text": " token", "finish_reason": None}],
                "usage": {"prompt_tokens": 16, "completion_tokens": i + 1}}).encode() + b"\n\n" for i in range(256)) + b"data: [DONE]\n\n"
async def fast(request):
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"}); await resp.prepare(request)
    for i in range(0, len(BODY), 16384):
        await resp.write(BODY[i:i + 16384])
    return resp
app = web.Application(); app.router.add_post("/v1/completions", paced); app.router.add_post("/v1/chat/completions", fast)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def wait_port(port: int) -> None:
    import socket

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listening on {port}")


def start_nginx(upstream_port: int) -> tuple[int, Path]:
    if shutil.which("nginx") is None:
        subprocess.run(["bash", "-c", "apt-get update -qq && apt-get install -y -qq nginx >/dev/null"], check=True)
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="loadproof-nginx-"))
    (folder / "logs").mkdir()
    (folder / "nginx.conf").write_text(f"""worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/logs/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  upstream engine {{ server 127.0.0.1:{upstream_port}; keepalive 512; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 3600s;
    }}
  }}
}}
""")
    subprocess.run(["nginx", "-p", str(folder), "-c", str(folder / "nginx.conf")], check=True)
    wait_port(port)
    return port, folder


async def latency(base: str, streams: int) -> list[float]:
    gaps: list[float] = []
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector, read_bufsize=1 << 20) as session:

        async def one() -> None:
            async with session.post(base + "/v1/completions", data=b"{}") as resp:
                buf = b""
                async for data in resp.content.iter_any():
                    now = time.perf_counter_ns()
                    buf += data
                    *events, buf = buf.split(b"\n\n")
                    for event in events:
                        if event.startswith(b"data: {"):
                            gaps.append((now - json.loads(event[6:])["t"]) / 1e6)

        await asyncio.gather(*(one() for _ in range(streams)))
    return gaps


async def ceiling(base: str, streams: int, requests: int) -> float:
    seconds, chunks = await consume(base, streams, requests)
    return chunks / seconds


def measure(levels: list[int]) -> list[dict[str, float | int | str]]:
    """Every path at every stream count: one row each (latency p50/p99 in ms, ceiling in chunks/s)."""
    up_port, relay_port = free_port(), free_port()
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM, str(up_port)])
    relay = nginx_folder = None
    rows: list[dict[str, float | int | str]] = []
    try:
        wait_port(up_port)
        relay = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loadproof",
                "relay",
                "--upstream",
                f"http://127.0.0.1:{up_port}",
                "--port",
                str(relay_port),
                "--max-in-flight",
                "2048",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "LOADPROOF_RELAY_KEYS": ""},
        )
        wait_port(relay_port)
        nginx_port, nginx_folder = start_nginx(up_port)
        paths = {"direct": up_port, "relay": relay_port, "nginx": nginx_port}
        print("path     streams  added latency per chunk p50 / p99 (ms)   ceiling (chunks/s)")
        for streams in levels:
            results = {}
            for name, port in paths.items():
                base = f"http://127.0.0.1:{port}"
                gaps = asyncio.run(latency(base, streams))
                q = statistics.quantiles(gaps, n=100)
                rate = asyncio.run(ceiling(base, streams, streams * 8))
                results[name] = (q[49], q[98], rate)
                rows.append({"path": name, "streams": streams, "p50_ms": q[49], "p99_ms": q[98], "chunks_per_s": rate})
                print(f"{name:8s} {streams:7d}  {q[49]:8.2f} / {q[98]:8.2f}                      {rate:12,.0f}")
            d, r, n = results["direct"], results["relay"], results["nginx"]
            print(
                f"  ratios at {streams}: relay/direct ceiling {r[2] / d[2]:.2f}, nginx/direct {n[2] / d[2]:.2f}, "
                f"relay/nginx {r[2] / n[2]:.2f}; added over direct p50 / p99: relay {r[0] - d[0]:+.2f} / "
                f"{r[1] - d[1]:+.2f} ms, nginx {n[0] - d[0]:+.2f} / {n[1] - d[1]:+.2f} ms",
                flush=True,
            )
    finally:
        if nginx_folder is not None:
            subprocess.run(
                ["nginx", "-p", str(nginx_folder), "-c", str(nginx_folder / "nginx.conf"), "-s", "stop"],
                stderr=subprocess.DEVNULL,
            )
        for proc in (relay, upstream):
            if proc is not None:
                proc.terminate()
                proc.wait()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="64,256")
    args = parser.parse_args()
    measure([int(x) for x in args.streams.split(",")])


if __name__ == "__main__":
    main()
