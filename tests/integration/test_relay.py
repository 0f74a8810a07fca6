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
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from loadproof.client import RequestSpec, StreamingClient
from loadproof.engines.process import free_port
from loadproof.protocol.openai import request_body
from loadproof.protocol.sse import DONE_EVENT, SSEDecoder
from tests.conftest import Script
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
        self.proc = subprocess.Popen([sys.executable, "-m", "loadproof", "relay", "--upstream", upstream,
                                      "--port", str(port), *args], stdout=subprocess.PIPE, stderr=self._err,
                                     text=True, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert f"listening on http://127.0.0.1:{port}" in line, line + log.read_text()
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:  # uvicorn binds just after the banner
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)

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
    return RequestSpec(request_id=f"r{i}", endpoint="completions",
                       body=request_body("completions", "m", "hi", max_tokens=8), deadline_s=deadline_s)


def chunks(n: int) -> list[bytes]:
    return [completion_chunk("x", i + 1) for i in range(n)] + [DONE_EVENT]


async def metric(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
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
    assert rec.output_tokens == 5 and rec.num_heartbeats >= 1  # the relay's first byte is a comment
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
    # the engine says nothing for 30 s (queueing, prefill); the client gives up after 10 s of silence
    upstream = await sse_server([Script(pieces=chunks(3), silence_first_s=30.0)])
    relay = relay_factory(upstream.url, "--heartbeat-s", "3")
    timeout = aiohttp.ClientTimeout(total=None, sock_read=10)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        async with s.post(relay.url + "/v1/completions", data=spec().body,
                          headers={"Authorization": f"Bearer {KEY}"}) as resp:
            decoder, events = SSEDecoder(), []
            async for data in resp.content.iter_any():
                events += decoder.feed(data)
    assert events[-1] == b"[DONE]" and len(events) == 4
    assert decoder.num_comments >= 9  # a heartbeat every 3 s through 30 s


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
        await asyncio.sleep(0.3)
        resp.close()
        left = time.monotonic()
    while not upstream.disconnects:
        assert time.monotonic() - left < 1.0, "the upstream kept streaming for a client that left"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    assert await metric(relay.url, "loadproof_relay_in_flight") == 0
    assert await metric(relay.url, "loadproof_relay_client_disconnects_total") == 1


@pytest.mark.asyncio
async def test_pool_rejects_the_one_too_many_and_recovers_every_slot(sse_server, relay_factory):
    hang = Script(pieces=chunks(3), hang_after=1)
    upstream = await sse_server([hang, hang, Script(status=500, pieces=[b'{"error":{"message":"boom"}}']),
                                 hang, Script(pieces=chunks(2)), Script(pieces=chunks(2))])
    relay = relay_factory(upstream.url, "--max-in-flight", "2", "--deadline-s", "2")
    async with StreamingClient(relay.url, api_key=KEY) as client:
        hanging = [asyncio.create_task(client.stream(spec(i, deadline_s=None))) for i in range(2)]
        await asyncio.sleep(0.5)
        third = await client.stream(spec(3))
        assert third.http_status == 429 and "all 2 slots" in third.error_message
        for task in hanging:  # two clients leave
            task.cancel()
        await asyncio.gather(*hanging, return_exceptions=True)
        await asyncio.sleep(0.3)
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


@pytest.mark.engine
@pytest.mark.asyncio
async def test_on_the_real_engine_a_client_leaving_frees_the_engine_request(engine, relay_factory):
    relay = relay_factory(engine.url)
    body = request_body("completions", engine.model, "Tell a very long story.", max_tokens=4000, ignore_eos=True)
    async with aiohttp.ClientSession() as s:
        resp = await s.post(relay.url + "/v1/completions", data=body, headers={"Authorization": f"Bearer {KEY}"})
        while engine.metric("vllm:num_requests_running") != 1:
            await resp.content.readany()
        await resp.content.readany()
        resp.close()
        left = time.monotonic()
    while engine.metric("vllm:num_requests_running") != 0:
        assert time.monotonic() - left < 1.0, "the engine kept decoding for a client that left through the relay"
        await asyncio.sleep(0.05)
