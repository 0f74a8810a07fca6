"""Benchmark: how exactly loadproof's client times TTFT and inter-token gaps, against a known schedule.

    scripts/in-venv python benchmarks/timing_accuracy.py [--streams 1,64,256]

The simulator (`loadproof.sim`, its own process) runs with a fixed step cost: every step takes
step_overhead_s = 20 ms, prefill and decode cost nothing, time_scale 1. So the schedule is known: a
request's first token comes at the end of the first step after it arrives (20 to 40 ms), then one
token every 20 ms. The sim process is the real `SimServer` with two hooks that stamp, on the machine's
monotonic clock, when each request reached the scheduler and when each step ended, so every token has a
reference time on the sim's own clock. Requests are told apart by their prompt length (each one unique).

Before the measured burst, the same burst goes twice through a plain aiohttp session with a trace
hook: once untimed (the first burst a fresh sim serves pays a one-time cost), once stamping when each
body was written: the client's share of "request in", apart from the sim's.
Figures per stream count:
- the sim's own lag: its step-to-step gaps against the nominal 20 ms (an asyncio loop serving 256
  streams runs late; that is the reference drifting, not the client);
- the client's error: client TTFT - the sim's TTFT (arrival at the scheduler to first-token step end),
  split into "request in" (client request start -> the request reached the sim's app: connection,
  sending, uvicorn) and "delivery" (step end -> the client's timestamp of that token: the sim's SSE
  write, the socket, the client's read), and each client inter-token gap - the sim's gap for the same
  two tokens;
- the client's gaps against the nominal 20 ms (both errors together).
After one warm-up request, 1 stream sends 20 requests one after another; N streams send N requests at
once. Each asks for 100 tokens.
It prints what it measured; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import aiohttp

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines.process import free_port
from loadproof.protocol.openai import request_body
from loadproof.records import RequestRecord

STEP_S = 0.020
MAX_TOKENS = 100
PROFILE = {
    "model": "sim",
    "max_model_len": 8192,
    "num_gpu_blocks": 200_000,
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 1 << 20,
    "time_scale": 1.0,
    "enable_prefix_caching": False,
    "cost": {
        "step_overhead_s": STEP_S,
        "prefill_s_per_token": 0.0,
        "prefill_s_per_token_ctx": 0.0,
        "decode_s_per_seq": 0.0,
        "decode_s_per_ctx_token": 0.0,
        "request_overhead_s": 0.0,
    },
    "source": "benchmarks/timing_accuracy.py: fixed 20 ms steps",
}

SIM = r"""
import asyncio, collections, contextvars, json, sys, time
import uvicorn
from loadproof.sim.config import SimConfig
from loadproof.sim.server import SimServer
sim = SimServer(SimConfig.model_validate(json.loads(sys.argv[1])))
sched = sim.scheduler
arrivals, tokens = {}, collections.defaultdict(list)
add, complete = sched.add, sched.complete
entered = contextvars.ContextVar("entered", default=0)
def stamp(app):  # when the request reached the app (headers parsed), before its body is read
    async def asgi(scope, receive, send):
        entered.set(time.perf_counter_ns())
        await app(scope, receive, send)
    return asgi
def hooked_add(request):
    arrivals[request.request_id] = (request.prompt_tokens, entered.get(), time.perf_counter_ns())
    add(request)
def hooked_complete(step, now_s):
    t = time.perf_counter_ns()
    out = complete(step, now_s)
    for e in out:
        tokens[e.request.request_id].append(t)
    return out
sched.add, sched.complete = hooked_add, hooked_complete
server = uvicorn.Server(uvicorn.Config(stamp(sim.app), host="127.0.0.1", port=int(sys.argv[2]), log_level="critical",
                                       access_log=False, lifespan="on", timeout_keep_alive=75))
try:
    asyncio.run(server.serve())
finally:  # uvicorn re-raises the SIGINT that stopped it
    with open(sys.argv[3], "w") as f:
        json.dump({rid: {"prompt_tokens": p, "entered_ns": e, "arrival_ns": a, "token_ns": tokens[rid]}
                   for rid, (p, e, a) in arrivals.items()}, f)
"""


def q(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


async def drive(url: str, streams: int, base_len: int) -> list[RequestRecord]:
    """`streams` requests at once (20 in a row for 1 stream), each with a prompt of unique length."""
    count = 20 if streams == 1 else streams
    bodies = [
        request_body("completions", "sim", "x" * (base_len + i), max_tokens=MAX_TOKENS, ignore_eos=True)
        for i in range(count)
    ]
    async with StreamingClient(url, max_connections=streams, keep_text=False) as client:
        # one request first, not counted: the first request of a process pays one-time costs (imports,
        # the resolver's thread pool) that would land on every request of the burst
        await client.stream(
            RequestSpec(
                "warm-up",
                "completions",
                request_body("completions", "sim", "x" * (base_len + count + 1), max_tokens=2, ignore_eos=True),
            )
        )
        if streams == 1:
            return [await client.stream(RequestSpec(str(i), "completions", b)) for i, b in enumerate(bodies)]
        return list(
            await asyncio.gather(*(client.stream(RequestSpec(str(i), "completions", b)) for i, b in enumerate(bodies)))
        )


async def traced_burst(url: str, streams: int, base_len: int) -> dict[str, list[int]]:
    """The same burst through a plain aiohttp session with a trace hook: when each body was written.
    {prompt length: [request start ns, body written ns]}; tells the client's share of "request in"."""
    written: dict[int, int] = {}

    async def on_chunk_sent(
        session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestChunkSentParams
    ) -> None:
        written.setdefault(ctx.trace_request_ctx["length"], time.perf_counter_ns())

    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(on_chunk_sent)
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as session:

        async def one(length: int) -> tuple[int, int]:
            body = request_body("completions", "sim", "x" * length, max_tokens=2, ignore_eos=True)
            t0 = time.perf_counter_ns()
            async with session.post(
                url + "/v1/completions",
                data=body,
                trace_request_ctx={"length": length},
                headers={"Content-Type": "application/json"},
            ) as resp:
                await resp.read()
            return length, t0

        await one(base_len - 1)
        starts = await asyncio.gather(*(one(base_len + i) for i in range(streams)))
    return {length: [t0, written[length]] for length, t0 in starts}


def compare(records: list[RequestRecord], sim: dict[str, dict]) -> dict[str, float]:
    by_len = {v["prompt_tokens"]: v for v in sim.values()}
    client_ttft, sim_ttft, ttft_err, client_gap, sim_gap, gap_err = [], [], [], [], [], []
    request_in, delivery = [], []
    for rec in records:
        ref = by_len.get(rec.prompt_tokens or -1)
        if not rec.ok or ref is None or rec.first_token_ns is None:
            continue
        ref_tokens = ref["token_ns"]
        c_ttft = (rec.first_token_ns - rec.send_ns) / 1e6
        s_ttft = (ref_tokens[0] - ref["arrival_ns"]) / 1e6
        client_ttft.append(c_ttft)
        sim_ttft.append(s_ttft)
        ttft_err.append(c_ttft - s_ttft)
        request_in.append((ref["entered_ns"] - rec.send_ns) / 1e6)
        times = rec.chunk_ns
        n = min(len(times), len(ref_tokens))
        delivery += [(times[i] - ref_tokens[i]) / 1e6 for i in range(n)]
        for i in range(1, n):
            c = (times[i] - times[i - 1]) / 1e6
            s = (ref_tokens[i] - ref_tokens[i - 1]) / 1e6
            client_gap.append(c)
            sim_gap.append(s)
            gap_err.append(c - s)
    nominal = STEP_S * 1e3
    return {
        "requests": len(client_ttft),
        "gaps": len(client_gap),
        "client_ttft_p50_ms": q(client_ttft, 50),
        "client_ttft_p99_ms": q(client_ttft, 99),
        "sim_ttft_p50_ms": q(sim_ttft, 50),
        "sim_ttft_p99_ms": q(sim_ttft, 99),
        "ttft_err_p50_ms": q(ttft_err, 50),
        "ttft_err_p99_ms": q(ttft_err, 99),
        "request_in_p50_ms": q(request_in, 50),
        "request_in_p99_ms": q(request_in, 99),
        "delivery_p50_ms": q(delivery, 50),
        "delivery_p99_ms": q(delivery, 99),
        "sim_gap_p50_ms": q(sim_gap, 50),
        "sim_gap_p99_ms": q(sim_gap, 99),
        "sim_lag_abs_p50_ms": q([abs(g - nominal) for g in sim_gap], 50),
        "sim_lag_abs_p99_ms": q([abs(g - nominal) for g in sim_gap], 99),
        "client_gap_p50_ms": q(client_gap, 50),
        "client_gap_p99_ms": q(client_gap, 99),
        "gap_err_abs_p50_ms": q([abs(e) for e in gap_err], 50),
        "gap_err_abs_p99_ms": q([abs(e) for e in gap_err], 99),
        "gap_vs_nominal_abs_p50_ms": q([abs(g - nominal) for g in client_gap], 50),
        "gap_vs_nominal_abs_p99_ms": q([abs(g - nominal) for g in client_gap], 99),
    }


def measure_one(streams: int, sim_cpus: set[int] | None = None) -> dict[str, float]:
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="timing-accuracy-")) / "sim-log.json"
    pin = (lambda: os.sched_setaffinity(0, sim_cpus)) if sim_cpus else None
    sim = subprocess.Popen(
        [sys.executable, "-c", SIM, json.dumps(PROFILE), str(port), str(log)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stderr=subprocess.DEVNULL,
        preexec_fn=pin,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or sim.poll() is not None:
                    raise SystemExit("the simulator did not start") from None
                time.sleep(0.05)
        traced = {}
        if streams > 1:  # the first burst a fresh sim serves pays a one-time cost: send one untimed
            asyncio.run(traced_burst(url, streams, base_len=3000))
            traced = asyncio.run(traced_burst(url, streams, base_len=2000))
        records = asyncio.run(drive(url, streams, base_len=64))
    finally:
        sim.send_signal(signal.SIGINT)
        sim.wait(timeout=30)
    sim_log = json.loads(log.read_text())
    row = {"streams": streams, "failed": sum(not r.ok for r in records), **compare(records, sim_log)}
    if traced:
        entered = {v["prompt_tokens"]: v["entered_ns"] for v in sim_log.values()}
        written = [(w - t0) / 1e6 for t0, w in traced.values()]
        reached = [(entered[length] - t0) / 1e6 for length, (t0, _) in traced.items() if length in entered]
        row.update(
            plain_written_p50_ms=q(written, 50),
            plain_written_p99_ms=q(written, 99),
            plain_in_p50_ms=q(reached, 50),
            plain_in_p99_ms=q(reached, 99),
        )
    print(
        f"{streams:4d} streams ({row['requests']} requests, {row['gaps']} gaps): TTFT client p50/p99 "
        f"{row['client_ttft_p50_ms']:.2f}/{row['client_ttft_p99_ms']:.2f} ms, sim {row['sim_ttft_p50_ms']:.2f}/"
        f"{row['sim_ttft_p99_ms']:.2f} ms, client - sim {row['ttft_err_p50_ms']:+.2f}/{row['ttft_err_p99_ms']:+.2f} ms "
        f"(request in {row['request_in_p50_ms']:.2f}/{row['request_in_p99_ms']:.2f} ms, token delivery "
        f"{row['delivery_p50_ms']:.2f}/{row['delivery_p99_ms']:.2f} ms); "
        f"gap client p50/p99 {row['client_gap_p50_ms']:.2f}/{row['client_gap_p99_ms']:.2f} ms, sim "
        f"{row['sim_gap_p50_ms']:.2f}/{row['sim_gap_p99_ms']:.2f} ms, |client - sim| "
        f"{row['gap_err_abs_p50_ms']:.3f}/{row['gap_err_abs_p99_ms']:.3f} ms, |client - 20 ms| "
        f"{row['gap_vs_nominal_abs_p50_ms']:.3f}/{row['gap_vs_nominal_abs_p99_ms']:.3f} ms",
        flush=True,
    )
    if "plain_in_p50_ms" in row:
        print(
            f"      the same burst from plain aiohttp: bodies written after {row['plain_written_p50_ms']:.2f}/"
            f"{row['plain_written_p99_ms']:.2f} ms, reached the sim's app after {row['plain_in_p50_ms']:.2f}/"
            f"{row['plain_in_p99_ms']:.2f} ms (p50/p99)",
            flush=True,
        )
    return row


def measure(levels: list[int], sim_cpus: set[int] | None = None) -> list[dict[str, float]]:
    return [measure_one(streams, sim_cpus) for streams in levels]


def _cpus(text: str | None) -> set[int] | None:
    return {int(c) for c in text.split(",")} if text else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="1,64,256")
    parser.add_argument(
        "--sim-cpus",
        help="pin the simulator to these cores (e.g. 2): on a host with spare cores, "
        "keeps the reference clock off the client's core",
    )
    parser.add_argument("--client-cpus", help="pin this process (the client) to these cores (e.g. 3)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    if args.client_cpus:
        os.sched_setaffinity(0, _cpus(args.client_cpus))
    rows = measure([int(x) for x in args.streams.split(",")], _cpus(args.sim_cpus))
    if args.json:
        meta = {
            "cpus": os.cpu_count(),
            "sim_cpus": args.sim_cpus,
            "client_cpus": args.client_cpus,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
