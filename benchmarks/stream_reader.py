"""Benchmark: what the client's stream reader costs per event, in microseconds, for each route that streams.

    scripts/in-venv python benchmarks/stream_reader.py [--events 200000] [--rounds 3]
    PYTHONPATH=OTHER/src .venv/bin/python benchmarks/stream_reader.py --routes chat   # another checkout's reader

One stream of `--events` answer chunks, each with its usage (as `continuous_usage_stats` sends them; the
Responses and Messages APIs' own events for those routes, written by each route's server side), handed to
`StreamingClient._read_stream` in 64 KiB reads by a fake StreamReader: the client's hot loop without the
network. Prints the best of `--rounds` per route. A checkout from before the route adapters (1d92c44) reads
only chat and completions, with `_read_stream(record, content)`; the script takes either signature. It asserts
nothing beyond the stream being read whole.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import time

from loadproof.client.stream import StreamingClient
from loadproof.records import RequestRecord

READ_BYTES = 64 * 1024


def chat_body(n: int) -> bytes:
    chunks = []
    for i in range(n):
        chunk = {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": "tok"}, "logprobs": None, "finish_reason": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": i + 1, "total_tokens": 11 + i},
        }
        chunks.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
    return b"".join(chunks) + b"data: [DONE]\n\n"


def route_body(name: str, n: int) -> bytes:
    """A stream of `n` tokens as the route's own server side writes it (the simulator's writer)."""
    from loadproof.protocol.routes import request_of, route_of
    from loadproof.protocol.routes.base import Answer

    route = route_of(name)
    request = route.parse(route.encode(request_of(name, "m", "hi", max_tokens=n)), route.content_type)
    answer = Answer("id", "m", 1, prompt_tokens=10)
    writer = route.writer(request, answer)
    out = [writer.open()]
    for k in range(n):
        answer.output_tokens = k + 1
        answer.finish_reason = "length" if k == n - 1 else None
        out.append(writer.piece("tok", False))
    out.append(writer.close())
    return b"".join(out)


class Reads:
    def __init__(self, body: bytes) -> None:
        self.reads = [body[i : i + READ_BYTES] for i in range(0, len(body), READ_BYTES)]
        self.i = 0

    async def readany(self) -> bytes:
        if self.i >= len(self.reads):
            return b""
        self.i += 1
        return self.reads[self.i - 1]


async def read_once(name: str, body: bytes, events: int) -> float:
    client = StreamingClient("http://127.0.0.1:1")
    record = RequestRecord(request_id="r", endpoint=name)
    args: list[object] = [record, Reads(body)]
    if len(inspect.signature(client._read_stream).parameters) == 3:  # the route adapters' client
        from loadproof.protocol.routes import route_of

        args.append(route_of(name))
    start = time.perf_counter()
    await client._read_stream(*args)  # type: ignore[arg-type]  # a fake StreamReader
    elapsed = time.perf_counter() - start
    if record.output_tokens != events:
        raise SystemExit(f"{name}: read {record.output_tokens} tokens of {events}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--routes", default="chat,responses,messages")
    args = parser.parse_args()
    for name in args.routes.split(","):
        body = chat_body(args.events) if name == "chat" else route_body(name, args.events)
        best = min(asyncio.run(read_once(name, body, args.events)) for _ in range(args.rounds))
        print(f"{name}: {best / args.events * 1e6:.3f} us an event ({args.events:,} events, best of {args.rounds})")


if __name__ == "__main__":
    main()
