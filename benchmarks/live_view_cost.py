"""Benchmark: what the live view costs the client, in streamed responses per second.

    bash benchmarks/serve_static_sse.sh 8088       # nginx serving client_ceiling.py's body
    scripts/in-venv python benchmarks/live_view_cost.py --url http://127.0.0.1:8088 [--concurrency 256]
        [--requests 4000] [--rounds 3] [--save benchmarks/results/live-view-cost.json]

The client ceiling's loop (`client_ceiling.consume`: StreamingClient against the static SSE body, 256
chunks of one token each per response), with the live view off and on, in alternating rounds so the
machine's drift falls on both:
- off: no live status at all, the client as every other benchmark runs it;
- on: what `loadproof run` does: the client's `on_start` and `on_record` hooks feed a `LiveStatus` in a
  `requests` phase, and `cli.ui.LiveView` redraws it every 0.5 s from its own thread as on a terminal
  (a rich Console with force_terminal, writing to /dev/null), reading every chunk's usage tokens for
  the rate and every first token for the TTFT median.
Each run is one untimed warm-up then the measured run, as in `client_ceiling.measure`. It prints every
run, the medians and their ratio (on / off), the median of each round's on / off, how far the off runs
spread among themselves (the noise), the CPU time the view's thread spent redrawing, and the CPU time
per 1,000 responses of the client's thread (off, on) and of both threads (on): a figure other processes
on the machine disturb less than responses/s. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from client_ceiling import consume
from rich.console import Console

from loadproof.cli.ui import LiveView
from loadproof.scenarios.live import LiveStatus


class TimedView(LiveView):
    """The CLI's view, counting its redraws and the CPU time its thread spent in them."""

    redraws = 0
    cpu_s = 0.0

    def tick(self) -> None:
        t0 = time.thread_time()
        super().tick()
        self.cpu_s += time.thread_time() - t0
        self.redraws += 1


def one_round(url: str, concurrency: int, requests: int, live: bool) -> dict[str, Any]:
    asyncio.run(consume(url, concurrency, concurrency))  # warm-up: connections, caches
    if not live:
        cpu = time.thread_time()
        seconds, chunks = asyncio.run(consume(url, concurrency, requests))
        return {"live": False, "seconds": seconds, "chunks": chunks, "client_cpu_s": time.thread_time() - cpu}
    status = LiveStatus("throughput")
    status.planned = requests
    status.phase("requests")
    with open(os.devnull, "w") as sink:
        console = Console(file=sink, force_terminal=True, width=120)
        with TimedView(status, console) as view:
            cpu = time.thread_time()
            seconds, chunks = asyncio.run(consume(url, concurrency, requests, **status.hooks(lambda record: None)))
            cpu = time.thread_time() - cpu
    assert status.done == requests, (status.done, requests)
    return {
        "live": True,
        "seconds": seconds,
        "chunks": chunks,
        "client_cpu_s": cpu,
        "redraws": view.redraws,
        "view_cpu_s": view.cpu_s,
    }


def measure(url: str, concurrency: int, requests: int, rounds: int) -> dict[str, Any]:
    rows = []
    for r in range(rounds):
        for live in (False, True) if r % 2 == 0 else (True, False):
            row = one_round(url, concurrency, requests, live)
            rows.append(row)
            extra = f"; the view's {row['redraws']} redraws {row['view_cpu_s'] * 1e3:.1f} ms of CPU" if live else ""
            print(
                f"  round {r + 1} live view {'on ' if live else 'off'}: {requests / row['seconds']:8,.0f} responses/s "
                f"({row['seconds']:.2f} s; the client's thread {row['client_cpu_s'] * 1e3 / requests * 1e3:.0f} ms "
                f"of CPU per 1,000 responses{extra})",
                flush=True,
            )
    off = [requests / r["seconds"] for r in rows if not r["live"]]
    on = [requests / r["seconds"] for r in rows if r["live"]]
    on_seconds = sum(r["seconds"] for r in rows if r["live"])
    return {
        "concurrency": concurrency,
        "requests": requests,
        "rounds": rows,
        "off_rps": statistics.median(off),
        "on_rps": statistics.median(on),
        "ratio": statistics.median(on) / statistics.median(off),
        "pair_ratio": statistics.median(b / a for a, b in zip(off, on)),  # each round's on / off, side by side
        "off_spread": (max(off) - min(off)) / statistics.median(off),  # the noise: off against itself
        "view_cpu_share": sum(r["view_cpu_s"] for r in rows if r["live"]) / on_seconds,
        # CPU per 1,000 responses: the client's thread, and with the view's thread added
        "off_cpu_ms": statistics.median(r["client_cpu_s"] for r in rows if not r["live"]) * 1e6 / requests,
        "on_cpu_ms": statistics.median(r["client_cpu_s"] for r in rows if r["live"]) * 1e6 / requests,
        "on_total_cpu_ms": statistics.median(r["client_cpu_s"] + r["view_cpu_s"] for r in rows if r["live"])
        * 1e6
        / requests,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL; the body is served at /v1/chat/completions")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3, help="pairs of off and on runs")
    parser.add_argument("--save", type=Path, help="write the figures as JSON (docs/benchmarks.md reads them)")
    args = parser.parse_args()
    result = measure(args.url, args.concurrency, args.requests, args.rounds)
    print(
        f"median off {result['off_rps']:,.0f}, on {result['on_rps']:,.0f} responses/s: on / off "
        f"{result['ratio']:.3f} ({(result['ratio'] - 1) * 100:+.1f}%); median of the rounds' on / off "
        f"{result['pair_ratio']:.3f}; off runs spread {result['off_spread'] * 100:.1f}% among themselves; "
        f"the view's thread used {result['view_cpu_share'] * 100:.2f}% of a core"
    )
    print(
        f"CPU per 1,000 responses (medians): off {result['off_cpu_ms']:.0f} ms; on {result['on_cpu_ms']:.0f} ms in "
        f"the client's thread, {result['on_total_cpu_ms']:.0f} ms with the view's: on / off "
        f"{result['on_total_cpu_ms'] / result['off_cpu_ms']:.3f}"
    )
    if args.save:
        result["meta"] = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(),
            "load": f"{os.getloadavg()[0]:.2f}",
            "command": f"scripts/in-venv python benchmarks/live_view_cost.py --url URL --concurrency "
            f"{args.concurrency} --requests {args.requests} --rounds {args.rounds}",
        }
        args.save.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
