"""Benchmark: how long each client takes to send very long prompts, and how that grows with size.

    scripts/in-venv python benchmarks/long_prompts.py [--sessions 24] [--sizes 100000,300000,1000000]
        [--peers 'vllm bench serve,GuideLLM 0.8.1,AIPerf 0.13.0' | none] [--peer-timeout 300] [--quick]

SESSIONS chat requests go out together, each carrying a prompt of exactly N tokens of the embedded
model's tokenizer (built by the haystack builder, about 5 bytes a token), to a small aiohttp server in
its own process that reads the whole body, discards it and answers a 4-chunk SSE stream in vLLM's chat
format (then a usage-only chunk and [DONE]). The server stamps, on the machine-wide monotonic clock, when
each request's head arrived and when its body was complete, and the body's size, so the client's send
time is measured per request: upload = body complete at the server - request start at the client. Also
per request: time to first token at the client (upload, then the server's answer). The same bodies then
go through a plain aiohttp post, as the reference; one untimed round goes first, so that neither client
pays for the server's first intake of that much data.

Then each peer (`vllm bench serve`, GuideLLM, AIPerf; see peers.py), which cannot send a given text,
runs SESSIONS requests at concurrency SESSIONS with its own synthetic dataset at N prompt tokens and 4
output tokens, against the same server, each command within --peer-timeout seconds (a command past it
is ended, and its row says where it was). Per peer and size: the command's wall time (start-up and data
generation included: the server's first request head shows when its sending began), its own TTFT
p50 / max, the server's "body in" (head to body complete) p50 / max, bytes per body, and the tokens of
one of its bodies counted here with the same tokenizer, which tells whether it really sent N tokens.
It prints what it measured; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp
import peers
from tokenizers import Tokenizer

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines.embedded import paths
from loadproof.engines.process import free_port
from loadproof.protocol.openai import request_body
from loadproof.units import NS_PER_S
from loadproof.workloads.haystack import HaystackBuilder

SERVER = r"""
import json, re, sys, time
from aiohttp import web
LOG = []  # per request: [model, head_ns, body_done_ns or None, body bytes]
SAMPLE = []  # the first complete body since the last /sample, for counting its tokens
MODEL = re.compile(rb'"model"\s*:\s*"([^"]+)"')
def chunk(model, choices, done):
    return b"data: " + json.dumps({"id": "chatcmpl-discard", "object": "chat.completion.chunk", "created": 0,
                                   "model": model, "choices": choices,
                                   "usage": {"prompt_tokens": 0, "completion_tokens": done, "total_tokens": done}}
                                  ).encode() + b"\n\n"
async def chat(request):
    rec = [None, time.perf_counter_ns(), None, 0]  # the handler starts once the request head is in
    LOG.append(rec)
    body = await request.read()
    rec[2] = time.perf_counter_ns()
    m = MODEL.search(body, 0, 400) or MODEL.search(body, max(0, len(body) - 2000))
    rec[0], rec[3] = m.group(1).decode() if m else "", len(body)
    if not SAMPLE:
        SAMPLE.append(body)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"}); await resp.prepare(request)
    for i in range(1, 5):
        await resp.write(chunk(rec[0], [{"index": 0, "delta": {"content": " ok"}, "logprobs": None,
                                         "finish_reason": "length" if i == 4 else None}], i))
    await resp.write(chunk(rec[0], [], 4))  # the usage-only chunk, as vLLM sends it
    await resp.write(b"data: [DONE]\n\n")
    return resp
async def log(request):
    out = list(LOG); LOG.clear(); return web.json_response(out)
async def sample(request):
    out = SAMPLE[0] if SAMPLE else b""; SAMPLE.clear(); return web.Response(body=out)
app = web.Application(client_max_size=1 << 30)
app.router.add_post("/v1/chat/completions", chat); app.router.add_get("/log", log)
app.router.add_get("/sample", sample)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""
PEER_TIMEOUT_S = 300


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
            async with session.post(
                url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                await resp.content.readany()
                first = time.perf_counter_ns()
                await resp.read()
            return name, (t0, first)

        return dict(await asyncio.gather(*(one(k, b) for k, b in bodies.items())))


def summarize(sent: dict[str, tuple[int, int]], records: list[list], tokens: int) -> dict[str, float]:
    log = {r[0]: r[1:] for r in records}  # {model name: [head_ns, body_done_ns, bytes]}
    uploads = [(log[k][1] - s) / NS_PER_S for k, (s, _) in sent.items()]
    ttfts = [(f - s) / NS_PER_S for s, f in sent.values()]
    total_bytes = sum(v[2] for v in log.values())
    span_s = (max(v[1] for v in log.values()) - min(s for s, _ in sent.values())) / NS_PER_S
    return {
        "tokens": tokens,
        "mb_per_body": total_bytes / len(log) / 1e6,
        "upload_p50_s": statistics.median(uploads),
        "upload_max_s": max(uploads),
        "ttft_p50_s": statistics.median(ttfts),
        "ttft_max_s": max(ttfts),
        "all_sent_s": span_s,
        "mb_per_s": total_bytes / 1e6 / span_s,
    }


def body_tokens(body: bytes, tokenizer: Tokenizer) -> int | None:
    """Tokens in the text of a chat body's messages, by the embedded tokenizer (no special tokens, no template)."""
    try:
        messages = json.loads(body)["messages"]
    except (ValueError, KeyError, TypeError):
        return None
    count = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts = [content]
        else:  # a list of parts, as GuideLLM sends: [{"type": "text", "text": ...}]
            parts = [p.get("text") or "" for p in content or [] if isinstance(p, dict)]
        count += sum(len(tokenizer.encode(text, add_special_tokens=False).ids) for text in parts if text)
    return count


def peer_row(
    run: peers.LongPromptRun,
    records: list[list],
    sample_tokens: int | None,
    sessions: int,
    tokens: int,
    timeout_s: float,
) -> dict[str, object]:
    """One peer at one size: its command, its own TTFT, and what the server saw of its bodies."""
    complete = [r for r in records if r[2] is not None]
    # a tool that sends a test request alone first (vllm bench serve with --ready-check-timeout-sec > 0, not
    # its default here) has the run as the last `sessions` bodies to arrive
    burst = sorted(complete, key=lambda r: r[1])[-sessions:]
    body_in = [(r[2] - r[1]) / NS_PER_S for r in burst]
    sizes = [r[3] for r in burst]
    note = run.note
    if run.timed_out:
        if not records:
            where = "while starting up or generating its data: no request had reached the server"
        elif len(complete) < sessions:
            where = (
                f"while sending: {len(complete)} bodies complete at the server, "
                f"{len(records) - len(complete)} coming in"
            )
        else:
            where = "after the server had taken every body and answered"
        note = f"did not finish in {timeout_s:.0f} s, {where}"
    elif run.note.startswith("exit") and not records:
        note = f"{run.note} (no request had reached the server)"
    return {
        "client": run.tool,
        "kind": "peer",
        "sessions": sessions,
        "tokens": tokens,
        "wall_s": run.wall_s,
        "timed_out": run.timed_out,
        "completed": run.completed,
        "ttft_p50_s": run.ttft_p50_s,
        "ttft_max_s": run.ttft_max_s,
        "peer_prompt_tokens": run.own_prompt_tokens,
        "server_requests": len(records),
        "server_complete": len(complete),
        "mb_per_body": statistics.median(sizes) / 1e6 if sizes else None,
        "mb_per_body_min": min(sizes) / 1e6 if sizes else None,
        "mb_per_body_max": max(sizes) / 1e6 if sizes else None,
        "body_tokens": sample_tokens,
        "body_in_p50_s": statistics.median(body_in) if body_in else None,
        "body_in_max_s": max(body_in) if body_in else None,
        "before_first_s": (min(r[1] for r in records) - run.start_ns) / NS_PER_S if records else None,
        "sending_s": (max(r[2] for r in burst) - min(r[1] for r in burst)) / NS_PER_S if burst else None,
        "after_last_s": (run.end_ns - max(r[2] for r in complete)) / NS_PER_S if complete else None,
        "note": note,
    }


def _s(value: object, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_peer_row(row: dict[str, object]) -> None:
    mb = "-" if row["mb_per_body"] is None else f"{row['mb_per_body']:.2f} MB"
    own = "" if row["peer_prompt_tokens"] is None else f", its own count {row['peer_prompt_tokens']:,.0f}"
    counted = "-" if row["body_tokens"] is None else f"{row['body_tokens']:,}"
    print(
        f"{row['client']:16s} {row['sessions']} x {row['tokens']:>9,} tokens: command {row['wall_s']:.1f} s "
        f"({_s(row['before_first_s'], 1)} s before its first request, {_s(row['sending_s'], 2)} s from first head "
        f"to last body, {_s(row['after_last_s'], 1)} s after); completed {row['completed']}, server saw "
        f"{row['server_requests']}; TTFT p50 {_s(row['ttft_p50_s'])} s, max {_s(row['ttft_max_s'])} s; body in p50 "
        f"{_s(row['body_in_p50_s'])} s, max {_s(row['body_in_max_s'])} s; {mb} per body, {counted} tokens in one "
        f"body{own}" + (f"; {row['note']}" if row["note"] else ""),
        flush=True,
    )


def _get(url: str) -> bytes:
    return urllib.request.urlopen(url, timeout=60).read()


def measure(
    sessions: int,
    sizes: list[int],
    peer_names: tuple[str, ...] | list[str] = peers.LONG_PROMPT_PEERS,
    peer_timeout_s: float = PEER_TIMEOUT_S,
    workdir: Path | None = None,
) -> list[dict[str, object]]:
    """loadproof and plain aiohttp rows, then one row per peer and size (kind "peer")."""
    tokenizer = Tokenizer.from_file(str(paths().model_dir / "tokenizer.json"))
    builder = HaystackBuilder(tokenizer, overhead_tokens=1, seed=731)
    for name in peer_names:  # installed before anything is timed (only the first time does this take long)
        try:
            peers.long_prompt_command(name, "http://127.0.0.1:1", 1, 1, 1, Path(tempfile.gettempdir()))
        except Exception as exc:
            print(f"  {name}: {type(exc).__name__}: {exc}", flush=True)
    work = workdir or Path(tempfile.mkdtemp(prefix="loadproof-long-"))
    if peer_names:
        print(f"peer result files under {work}", flush=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    url = f"http://127.0.0.1:{port}"
    rows: list[dict[str, object]] = []
    try:
        _wait(url)
        for tokens in sizes:
            bodies = build_bodies(sessions, tokens, builder, f"t{tokens}")
            asyncio.run(send_plain(url, bodies))  # untimed: the server's first intake of this size grows its memory
            _get(url + "/log")
            for name, fn in (("loadproof", send_loadproof), ("plain aiohttp", send_plain)):
                sent = asyncio.run(fn(url, bodies))
                log = json.loads(_get(url + "/log"))
                row = {"client": name, "sessions": sessions, **summarize(sent, log, tokens)}
                rows.append(row)
                print(
                    f"{name:16s} {sessions} x {tokens:>9,} tokens ({row['mb_per_body']:.1f} MB each): upload p50 "
                    f"{row['upload_p50_s']:.3f} s, max {row['upload_max_s']:.3f} s; first token p50 "
                    f"{row['ttft_p50_s']:.3f} s, max {row['ttft_max_s']:.3f} s; all {sessions} sent in "
                    f"{row['all_sent_s']:.2f} s ({row['mb_per_s']:,.0f} MB/s)",
                    flush=True,
                )
            del bodies
            for name in peer_names:
                _get(url + "/log")
                _get(url + "/sample")
                time.sleep(2)  # the last command's processes gone, the machine quiet
                folder = work / f"{name.split()[0].lower()}-{tokens}"
                try:
                    run = peers.run_long_prompt(name, url, tokens, sessions, sessions, folder, peer_timeout_s)
                except Exception as exc:  # a peer that cannot even start is a row with the reason, not a crash
                    run = peers.LongPromptRun(name, note=f"{type(exc).__name__}: {exc}"[:200])
                    run.start_ns = run.end_ns = time.perf_counter_ns()
                records = json.loads(_get(url + "/log"))
                sample = _get(url + "/sample")
                row = peer_row(
                    run, records, body_tokens(sample, tokenizer) if sample else None, sessions, tokens, peer_timeout_s
                )
                rows.append(row)
                print_peer_row(row)
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
    parser.add_argument("--quick", action="store_true", help="4 sessions at 10,000 and 30,000 tokens, to try it")
    parser.add_argument(
        "--peers",
        default=",".join(peers.LONG_PROMPT_PEERS),
        help="comma-separated, of: " + ", ".join(peers.LONG_PROMPT_PEERS) + "; 'none' for none",
    )
    parser.add_argument("--peer-timeout", type=float, default=PEER_TIMEOUT_S, help="seconds for each peer command")
    args = parser.parse_args()
    if not (paths().model_dir / "tokenizer.json").is_file():
        raise SystemExit("no embedded tokenizer: run `loadproof serve --embedded` once")
    names = [] if args.peers.strip().lower() == "none" else [n.strip() for n in args.peers.split(",") if n.strip()]
    unknown = [n for n in names if n not in peers.LONG_PROMPT_PEERS]
    if unknown:
        raise SystemExit(f"unknown peers {unknown}; choose from {list(peers.LONG_PROMPT_PEERS)}")
    sessions, sizes = (4, [10_000, 30_000]) if args.quick else (args.sessions, [int(x) for x in args.sizes.split(",")])
    t0 = time.monotonic()
    measure(sessions, sizes, names, args.peer_timeout)
    print(f"the whole run took {time.monotonic() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
