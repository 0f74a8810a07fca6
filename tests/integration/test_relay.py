"""The relay as a real process on 127.0.0.1, in front of a scripted upstream (and the real engine).

The scripted upstream is a real HTTP server in this test process that sends exactly what a test needs
(silence, a dropped connection, an error status), which a real engine cannot be made to do on demand.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines.process import free_port
from loadproof.protocol.routes import request_body
from loadproof.protocol.sse import DONE_EVENT, SSEDecoder
from tests.conftest import Script
from tests.polling import eventually, largest_while, poll_async, wait_until
from tests.sse_chunks import completion_chunk

KEY = "sk-relay-test-7f3c9a"


class RelayProcess:
    def __init__(self, upstream: str, log: Path, *args: str, keys: str | None = KEY) -> None:
        env = {**os.environ}
        if keys:
            env["LOADPROOF_RELAY_KEYS"] = keys
        self.log = log
        self._err = open(log, "wb")
        port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loadproof", "relay", "--upstream", upstream, "--port", str(port), *args],
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert f"listening on http://127.0.0.1:{port}" in line, line + log.read_text()
        self.url = f"http://127.0.0.1:{port}"

        def listening() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                return False

        wait_until(listening, 20, log.read_text, every_s=0.05)  # the banner comes once it listens: this makes sure

    def stop(self) -> str:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._err.close()
        return self.log.read_text()


@pytest.fixture
def relay_factory(tmp_path) -> Iterator:
    started: list[RelayProcess] = []

    def start(upstream: str, *args: str, keys: str | None = KEY) -> RelayProcess:
        proc = RelayProcess(upstream, tmp_path / f"relay-{len(started)}.log", *args, keys=keys)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.proc.poll() is None:
            proc.stop()


def spec(i: int = 0, deadline_s: float | None = 60) -> RequestSpec:
    return RequestSpec(
        request_id=f"r{i}",
        endpoint="completions",
        body=request_body("completions", "m", "hi", max_tokens=8),
        deadline_s=deadline_s,
    )


def chunks(n: int) -> list[bytes]:
    return [completion_chunk("x", i + 1) for i in range(n)] + [DONE_EVENT]


async def metric(url: str, name: str, key: str | None = KEY) -> float:
    """The sum of every series of `name` in the relay's /metrics."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with aiohttp.ClientSession() as s, s.get(url + "/metrics", headers=headers) as r:
        assert r.status == 200, r.status
        text = await r.text()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


pytestmark = pytest.mark.timeout(120)


@pytest.mark.asyncio
async def test_stream_passes_through_with_usage_and_auth(sse_server, relay_factory):
    upstream = await sse_server([Script(pieces=chunks(5))])
    relay = relay_factory(upstream.url)
    async with StreamingClient(relay.url, api_key=KEY) as client:
        rec = await client.stream(spec())
    assert rec.ok, rec.error_message
    assert rec.output_tokens == 5 and rec.num_heartbeats == 0  # never silent for 5 s: nothing added
    async with StreamingClient(relay.url, api_key="sk-wrong") as client:
        bad = await client.stream(spec())
    async with StreamingClient(relay.url) as client:
        none = await client.stream(spec())
    assert bad.http_status == 401 and none.http_status == 401
    log = relay.stop()
    assert KEY not in log and "sk-wrong" not in log
    assert "127.0.0.1:" + upstream.url.rsplit(":", 1)[1] not in log  # no upstream address either
    rows = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert [r["outcome"] for r in rows].count("unauthorized") == 2 and rows[0]["outcome"] == "ok"


@pytest.mark.asyncio
async def test_a_silent_upstream_keeps_an_idle_timeout_client_connected(sse_server, relay_factory):
    # the engine says nothing for 8 s (queueing, prefill); the client gives up after 3 s of silence
    upstream = await sse_server([Script(pieces=chunks(3), silence_first_s=8.0)])
    relay = relay_factory(upstream.url, "--heartbeat-s", "0.8")
    timeout = aiohttp.ClientTimeout(total=None, sock_read=3)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        async with s.post(
            relay.url + "/v1/completions", data=spec().body, headers={"Authorization": f"Bearer {KEY}"}
        ) as resp:
            decoder, events = SSEDecoder(), []
            async for data in resp.content.iter_any():
                events += decoder.feed(data)
    assert events[-1] == b"[DONE]" and len(events) == 4
    # a blank line every 0.8 s through the 8 s (10; a busy machine may delay a few, or stretch the silence)
    assert decoder.num_heartbeats >= 6 and decoder.num_comments == 0


@pytest.mark.asyncio
async def test_upstream_dying_mid_stream_is_an_in_band_error(sse_server, relay_factory):
    upstream = await sse_server([Script(pieces=chunks(6), drop_after=3, pause_s=0.05)])
    relay = relay_factory(upstream.url)
    async with StreamingClient(relay.url, api_key=KEY) as client:
        rec = await client.stream(spec())
    assert not rec.ok and rec.error_kind == "stream_error" and "mid-stream" in rec.error_message
    assert rec.output_tokens == 3
    assert await metric(relay.url, "loadproof_relay_upstream_errors_total") == 1


@pytest.mark.asyncio
async def test_unreachable_upstream_before_the_first_byte_is_an_http_error(relay_factory):
    relay = relay_factory("http://127.0.0.1:9")
    async with StreamingClient(relay.url, api_key=KEY) as client:
        rec = await client.stream(spec())
    assert rec.http_status == 502 and "unreachable" in rec.error_message


@pytest.mark.asyncio
async def test_client_leaving_closes_the_upstream_within_a_second(sse_server, relay_factory):
    upstream = await sse_server([Script(pieces=chunks(400), pause_s=0.05)])
    relay = relay_factory(upstream.url)
    async with aiohttp.ClientSession() as s:
        resp = await s.post(relay.url + "/v1/completions", data=spec().body, headers={"Authorization": f"Bearer {KEY}"})
        await resp.content.readany()
        await asyncio.sleep(0.3)  # sleep: the client reads a while (the upstream goes on streaming), then leaves
        resp.close()
    await eventually(lambda: upstream.disconnects, 1.0, "the upstream stopping for a client that left")
    await eventually(
        lambda: metric(relay.url, "loadproof_relay_client_disconnects_total"),
        10,
        "the relay logged the client's leaving",
    )
    assert await metric(relay.url, "loadproof_relay_in_flight") == 0
    assert await metric(relay.url, "loadproof_relay_client_disconnects_total") == 1


@pytest.mark.asyncio
async def test_a_client_leaving_after_done_is_a_complete_request_not_a_disconnect(sse_server, relay_factory):
    # the upstream sends [DONE] split across two writes and then holds its end of body back: the client has the
    # whole stream, stops at [DONE] and closes (as the openai SDKs, GuideLLM and AIPerf may) before the relay
    # sees the end
    pieces = [completion_chunk("x", 1), b"data: [DO", b"NE]\n\n", b"never sent"]
    upstream = await sse_server(
        [Script(pieces=pieces, pause_s=0.05, hang_after=3), Script(pieces=pieces, hang_after=1)]
    )
    relay = relay_factory(upstream.url)
    # the first client reads to [DONE]; the second leaves after its first event, mid-stream
    async with aiohttp.ClientSession() as s:
        for until in (b"data: [DONE]", b"data: {"):
            resp = await s.post(
                relay.url + "/v1/completions", data=spec().body, headers={"Authorization": f"Bearer {KEY}"}
            )
            async for line in resp.content:
                if line.startswith(until):
                    break
            resp.close()
            await eventually(in_flight_is(relay.url, 0), 10, "the relay freed the slot of a client that left")
    assert await metric(relay.url, "loadproof_relay_client_disconnects_total") == 1
    rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
    assert [(r["status"], r["outcome"]) for r in rows] == [(200, "ok"), (200, "client_disconnect")]


@pytest.mark.asyncio
async def test_pool_rejects_the_one_too_many_and_recovers_every_slot(sse_server, relay_factory):
    hang = Script(pieces=chunks(3), hang_after=1)
    upstream = await sse_server(
        [
            hang,
            hang,
            Script(status=500, pieces=[b'{"error":{"message":"boom"}}']),
            hang,
            Script(pieces=chunks(2)),
            Script(pieces=chunks(2)),
        ]
    )
    relay = relay_factory(upstream.url, "--max-in-flight", "2", "--deadline-s", "2")
    async with StreamingClient(relay.url, api_key=KEY) as client:
        hanging = [asyncio.create_task(client.stream(spec(i, deadline_s=None))) for i in range(2)]
        await eventually(in_flight_is(relay.url, 2), 10, "both hanging requests hold a slot")
        third = await client.stream(spec(3))
        assert third.http_status == 429 and "all 2 slots" in third.error_message
        for task in hanging:  # two clients leave
            task.cancel()
        await asyncio.gather(*hanging, return_exceptions=True)
        await eventually(in_flight_is(relay.url, 0), 10, "the relay freed the slots of the clients that left")
        error = await client.stream(spec(4))  # the upstream answers 500
        timeout = await client.stream(spec(5, deadline_s=None))  # the relay's 2 s deadline passes
        ok = await asyncio.gather(client.stream(spec(6)), client.stream(spec(7)))  # both slots free again
    assert error.http_status == 500 and "boom" in error.error_message
    assert timeout.error_kind == "stream_error" and "deadline" in timeout.error_message
    assert all(r.ok for r in ok)
    assert await metric(relay.url, "loadproof_relay_in_flight") == 0
    assert await metric(relay.url, "loadproof_relay_rejected_total") == 1
    assert await metric(relay.url, "loadproof_relay_client_disconnects_total") == 2


@pytest.mark.asyncio
async def test_body_size_limit(sse_server, relay_factory):
    upstream = await sse_server([Script(pieces=chunks(1))])
    relay = relay_factory(upstream.url, "--max-body-mib", "0.01")
    big = request_body("completions", "m", "word " * 5000, max_tokens=8)
    async with StreamingClient(relay.url, api_key=KEY) as client:
        rec = await client.stream(RequestSpec(request_id="big", endpoint="completions", body=big))
    assert rec.http_status == 413 and not upstream.bodies


def in_flight_is(url: str, n: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await metric(url, "loadproof_relay_in_flight") == n

    return check


def auth(key: str = KEY) -> bytes:
    return f"Authorization: Bearer {key}\r\n".encode()


def post(path: str, body: bytes, extra: bytes = b"", length: int | None = None) -> bytes:
    """A raw HTTP/1.1 POST, for what a client library would not send (a stall, a lie about the length)."""
    size = len(body) if length is None else length
    return (
        (
            f"POST {path} HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n"
        ).encode()
        + extra
        + b"\r\n"
        + body
    )


async def exchange(
    url: str, data: bytes, *, then: bytes = b"", wait_s: float = 0.0, timeout_s: float = 10.0
) -> tuple[bytes, float]:
    """Send `data` (then, after `wait_s`, `then`) on one connection; read until the relay closes it.
    Returns what came back and the seconds from the first send to the close."""
    host, port = url.rsplit("/", 1)[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    t0 = time.monotonic()
    writer.write(data)
    if then:
        await asyncio.sleep(wait_s)  # sleep: the rest comes later, as from a slow client
        writer.write(then)
    try:
        out = await asyncio.wait_for(reader.read(-1), timeout_s)
    finally:
        writer.close()
    return out, time.monotonic() - t0


def statuses(raw: bytes) -> list[int]:
    """The status of every response in `raw`, in order (heads only: bodies here never hold `HTTP/1.`)."""
    return [int(line.split(b" ")[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/1.")]


async def serve_app(app: web.Application) -> tuple[str, web.AppRunner]:
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}", runner  # type: ignore[union-attr]  # started: it has a server


@pytest.mark.asyncio
async def test_metrics_need_the_key_when_keys_are_set(sse_server, relay_factory):
    upstream = await sse_server([Script(pieces=chunks(1))])
    keyed = relay_factory(upstream.url)
    async with aiohttp.ClientSession() as s:
        for headers, expected in (
            ({}, 401),
            ({"Authorization": "Bearer sk-wrong"}, 401),
            ({"Authorization": f"Bearer {KEY}"}, 200),
        ):
            async with s.get(keyed.url + "/metrics", headers=headers) as r:
                text = await r.text()
                assert r.status == expected, (headers, r.status)
                assert ("loadproof_relay_in_flight" in text) == (expected == 200)
            async with s.get(keyed.url + "/health", headers=headers) as r:
                assert r.status == 200  # a load balancer's check needs no key: it shows no figure but in_flight
        open_relay = relay_factory(upstream.url, keys=None)
        async with s.get(open_relay.url + "/metrics") as r:
            assert r.status == 200 and "loadproof_relay_requests_total" in await r.text()


@pytest.mark.asyncio
async def test_an_engine_error_event_split_across_reads_is_logged_as_an_upstream_error(sse_server, relay_factory):
    error = b'data: {"error": {"message": "engine fell over", "type": "InternalServerError", "code": 500}}\n\n'
    pieces = [completion_chunk("x", 1), error[:10], error[10:], DONE_EVENT]  # `data: {"er` | `ror": ...`
    upstream = await sse_server([Script(pieces=pieces, pause_s=0.1)])
    relay = relay_factory(upstream.url)
    async with StreamingClient(relay.url, api_key=KEY) as client:
        rec = await client.stream(spec())
    assert not rec.ok and rec.error_kind == "stream_error" and "engine fell over" in rec.error_message
    assert await metric(relay.url, 'loadproof_relay_requests_total{outcome="upstream_error_event"}') == 1
    assert await metric(relay.url, "loadproof_relay_upstream_errors_total") == 1
    rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
    assert [(r["status"], r["outcome"]) for r in rows] == [(200, "upstream_error_event")]


@pytest.mark.asyncio
async def test_a_client_leaving_a_non_streamed_request_closes_the_upstream_and_frees_the_slot(relay_factory):
    left_at: list[float] = []
    arrived: list[bool] = []

    async def slow_answer(request: web.Request) -> web.Response:  # a long non-streamed generation
        await request.read()
        arrived.append(True)
        if await poll_async(lambda: request.transport is None or request.transport.is_closing(), 30):
            left_at.append(time.monotonic())
            return web.Response(status=499)
        return web.json_response({"choices": [{"index": 0, "text": "late"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", slow_answer)
    url, runner = await serve_app(app)
    try:
        relay = relay_factory(url)
        body = request_body("completions", "m", "hi", max_tokens=8, stream=False)
        host, port = relay.url.rsplit("/", 1)[1].split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(post("/v1/completions", body, auth()))
        await eventually(lambda: arrived, 10, "the request reached the upstream")
        assert await metric(relay.url, "loadproof_relay_in_flight") == 1  # waiting for the answer
        writer.close()  # the client gives up
        await eventually(lambda: left_at, 1.0, "the upstream stopping for a client that left")
        await eventually(
            lambda: metric(relay.url, "loadproof_relay_client_disconnects_total"),
            10,
            "the relay counted the client's leaving",
        )
        assert await metric(relay.url, "loadproof_relay_in_flight") == 0
        assert await metric(relay.url, "loadproof_relay_client_disconnects_total") == 1
        rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
        assert [(r["status"], r["outcome"], r["stream"]) for r in rows] == [(499, "client_disconnect", False)]
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "stall, args",
    [
        ("body", ("--body-timeout-s", "1")),  # 10 of 100 declared bytes, then nothing
        ("body", ("--body-timeout-s", "60", "--deadline-s", "1")),  # the body's time never outlasts the deadline
        ("head", ("--body-timeout-s", "1")),  # half a request head, then nothing
    ],
)
async def test_a_stalled_upload_is_answered_408_within_the_bound_and_frees_its_slot(
    sse_server, relay_factory, stall, args
):
    upstream = await sse_server([Script(pieces=chunks(1))])
    relay = relay_factory(upstream.url, *args)
    request = post("/v1/completions", b'{"model": "m", "p', auth(), length=100)
    if stall == "head":
        request = request[:40]
    task = asyncio.create_task(exchange(relay.url, request))
    held = await largest_while(task, lambda: metric(relay.url, "loadproof_relay_in_flight"))
    answer, seconds = await task
    assert statuses(answer) == [408] and 0.9 < seconds < 2.0, (answer[:200], seconds)
    assert held == (1 if stall == "body" else 0)  # a body holds a slot while it arrives; a head does not
    assert await metric(relay.url, "loadproof_relay_in_flight") == 0
    assert not upstream.bodies  # nothing half-read went upstream
    rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
    assert [r["outcome"] for r in rows] == (["body_timeout"] if stall == "body" else [])


@pytest.mark.asyncio
async def test_slow_uploads_hold_pool_slots_so_the_one_too_many_gets_429_at_once(sse_server, relay_factory):
    upstream = await sse_server([Script(pieces=chunks(2))])
    relay = relay_factory(upstream.url, "--max-in-flight", "2", "--body-timeout-s", "2")
    big = post("/v1/completions", b'{"model": "m", "prompt": "', auth(), length=64 * 1024 * 1024)
    uploads = [asyncio.create_task(exchange(relay.url, big)) for _ in range(2)]  # 64 MiB declared, 27 B sent
    await eventually(in_flight_is(relay.url, 2), 1.5, "both uploads hold a slot before their 2 s bound")
    t0 = time.monotonic()
    async with StreamingClient(relay.url, api_key=KEY) as client:
        third = await client.stream(spec(3))
    assert third.http_status == 429 and time.monotonic() - t0 < 0.5
    answers = await asyncio.gather(*uploads)
    assert [statuses(a) for a, _ in answers] == [[408], [408]]
    async with StreamingClient(relay.url, api_key=KEY) as client:
        after = await client.stream(spec(4))
    assert after.ok and await metric(relay.url, "loadproof_relay_in_flight") == 0
    assert await metric(relay.url, "loadproof_relay_rejected_total") == 1


@pytest.mark.asyncio
async def test_http_framing_chunked_upload_expect_continue_pipelining_http10_and_bad_requests(
    sse_server, relay_factory
):
    upstream = await sse_server([Script(pieces=chunks(2))])
    relay = relay_factory(upstream.url)
    body = request_body("completions", "m", "hi", max_tokens=8)
    # a chunked upload, in pieces with a pause between: the upstream gets exactly the body
    head = (
        b"POST /v1/completions HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
        + auth()
        + b"\r\n"
    )
    framed = b"".join(b"%x;ext=1\r\n%b\r\n" % (len(body[i : i + 7]), body[i : i + 7]) for i in range(0, len(body), 7))
    answer, _ = await exchange(relay.url, head + framed[:30], then=framed[30:] + b"0\r\nTrailer: x\r\n\r\n", wait_s=0.2)
    assert statuses(answer) == [200] and b"transfer-encoding: chunked" in answer and answer.endswith(b"0\r\n\r\n")
    assert upstream.bodies[-1] == body
    # Expect: 100-continue: the relay says go on only to a request it will take
    answer, _ = await exchange(
        relay.url,
        post("/v1/completions", b"", auth() + b"Expect: 100-continue\r\nConnection: close\r\n", length=len(body)),
        then=body,
        wait_s=0.3,
    )
    assert statuses(answer) == [100, 200]
    answer, _ = await exchange(
        relay.url, post("/v1/completions", b"", auth("sk-wrong") + b"Expect: 100-continue\r\n", length=len(body))
    )
    assert statuses(answer) == [401]
    # two requests in one write, on one kept-alive connection: two answers, in order
    answer, _ = await exchange(
        relay.url,
        post("/v1/completions", body, auth()) + b"GET /health HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\n",
    )
    assert statuses(answer) == [200, 200] and answer.rstrip().endswith(b"}") and b"data: [DONE]" in answer
    # HTTP/1.0: the stream is not chunked and ends with the connection
    answer, _ = await exchange(relay.url, post("/v1/completions", body, auth()).replace(b"HTTP/1.1", b"HTTP/1.0"))
    assert statuses(answer) == [200] and b"transfer-encoding" not in answer and answer.endswith(DONE_EVENT)
    # what no client should send
    for bad, status in (
        (b"GARBAGE\r\n\r\n", 400),
        (post("/v1/completions", body, auth() + b"Transfer-Encoding: chunked\r\n"), 400),
        (b"POST /v1/completions HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"GET /v1/completions HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\n", 405),
        (b"GET /v2/anything?key=x HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\n", 404),
        (b"GET /health HTTP/2.0\r\n\r\n", 505),
        (b"GET /health HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", 431),
    ):
        answer, _ = await exchange(relay.url, bad)
        assert statuses(answer) == [status], (bad[:60], answer[:200])
    log = relay.stop()
    assert "/v2/anything" not in log and "key=x" not in log  # an unknown path is not logged as sent


@pytest.mark.asyncio
async def test_tokenize_detokenize_version_and_the_engines_metrics_are_forwarded_behind_the_key(relay_factory):
    seen: list[tuple[str, str, bytes, str | None]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, await request.read(), request.headers.get("Authorization")))
        if request.path == "/metrics":
            return web.Response(
                text="# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3.0\n",
                content_type="text/plain",
            )
        if request.path == "/version":
            return web.json_response({"version": "0.32.0"})
        return web.json_response({"count": 7, "tokens": [1, 2, 3]} if request.path == "/tokenize" else {"prompt": "hi"})

    app = web.Application()
    for path in ("/tokenize", "/detokenize"):
        app.router.add_post(path, record)
    app.router.add_get("/metrics", record)
    app.router.add_get("/version", record)
    url, runner = await serve_app(app)
    env_key = "sk-upstream-5d1e"
    os.environ["LOADPROOF_UPSTREAM_API_KEY"] = env_key
    try:
        relay = relay_factory(url, "--max-in-flight", "1")
    finally:
        del os.environ["LOADPROOF_UPSTREAM_API_KEY"]
    try:
        keyed = {"Authorization": f"Bearer {KEY}"}
        async with aiohttp.ClientSession() as s:
            for path, body in (("/tokenize", {"model": "m", "prompt": "hi"}), ("/detokenize", {"tokens": [1]})):
                async with s.post(relay.url + path, json=body) as r:
                    assert r.status == 401  # the API's key, as on /v1
                async with s.post(relay.url + path, json=body, headers=keyed) as r:
                    assert r.status == 200 and (await r.json()) == (
                        {"count": 7, "tokens": [1, 2, 3]} if path == "/tokenize" else {"prompt": "hi"}
                    )
            async with s.get(relay.url + "/version", headers=keyed) as r:
                assert r.status == 200 and (await r.json()) == {"version": "0.32.0"}
            async with s.get(relay.url + "/engine/metrics") as r:
                assert r.status == 401 and "vllm:" not in await r.text()
            # the pool's one slot is held by a request still uploading: a scrape takes no slot, /tokenize does
            held = asyncio.create_task(exchange(relay.url, post("/v1/completions", b"{", auth(), length=100)))
            await eventually(in_flight_is(relay.url, 1), 10, "the upload holds the pool's slot")
            async with s.get(relay.url + "/engine/metrics", headers=keyed) as r:
                engine_text = await r.text()
                assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
            async with s.post(relay.url + "/tokenize", json={"prompt": "x"}, headers=keyed) as r:
                assert r.status == 429
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
            async with s.get(relay.url + "/metrics", headers=keyed) as r:
                relay_text = await r.text()
        # the engine's figures only under /engine/metrics, the relay's only under /metrics
        assert "vllm:num_requests_running 3.0" in engine_text and "loadproof_relay" not in engine_text
        assert "vllm:" not in relay_text and "loadproof_relay_in_flight" in relay_text
        assert [(m, p) for m, p, _, _ in seen] == [
            ("POST", "/tokenize"),
            ("POST", "/detokenize"),
            ("GET", "/version"),
            ("GET", "/metrics"),
        ]
        assert seen[0][2] == b'{"model": "m", "prompt": "hi"}'  # the body, byte for byte
        assert {a for _, _, _, a in seen} == {f"Bearer {env_key}"}  # the upstream's key, never the client's
        log = relay.stop()
        assert KEY not in log and env_key not in log
        rows = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
        assert {r["path"] for r in rows if r["outcome"] == "ok"} == {
            "/tokenize",
            "/detokenize",
            "/version",
            "/engine/metrics",
        }
    finally:
        await runner.cleanup()
