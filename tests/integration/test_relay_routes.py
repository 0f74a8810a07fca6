"""The relay forwards every registered route's API unchanged (protocol.routes: its path, from the registry):
the Responses and Messages streams, whose events carry `event:` lines and end with an event of their own
instead of `data: [DONE]`, and a transcription's multipart form, its boundary in the content type.

The upstream is a scripted server in this process sending vLLM 0.32's shapes (tests/unit/relay/test_stream.py
has the streams), silent before the first event and between two, so heartbeats fall among named events; after
the last event it holds its end of body back, as an engine still closing does, so a client that stops at the
last event and leaves is seen doing so. The SDKs on the real engine: tests/integration/test_relay_engine.py.
"""

from __future__ import annotations

import hashlib
import json

import aiohttp
import pytest
from aiohttp import web

from loadproof.protocol.routes import route_of
from tests.integration.test_relay import KEY, in_flight_is, metric, relay_factory, serve_app  # noqa: F401 (relay_factory: a fixture)
from tests.polling import eventually, poll_async
from tests.unit.relay.test_stream import MESSAGES, RESPONSES

pytestmark = pytest.mark.timeout(120)

GAP_S = 0.3  # the upstream's silence before its first event and after it
HEARTBEAT_S = 0.05
FORM = "multipart/form-data; boundary=loadproof-test-0c7d"
AUDIO_FORM = (
    b'--loadproof-test-0c7d\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n'
    b'--loadproof-test-0c7d\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
    b"Content-Type: audio/wav\r\n\r\nRIFF\x00\x01\x02\xff{not json}\r\n--loadproof-test-0c7d--\r\n"
)


def events(stream: bytes) -> list[bytes]:
    """A stream's events, the blank lines between them (heartbeats) dropped."""
    return [e.lstrip(b"\n") for e in stream.split(b"\n\n") if e.strip(b"\n")]


@pytest.mark.asyncio
async def test_responses_and_messages_streams_pass_unchanged_and_a_client_stopping_at_their_last_event_is_ok(
    relay_factory,  # noqa: F811 (the fixture imported above)
):
    streams = {route_of("responses").path: RESPONSES, route_of("messages").path: MESSAGES}
    seen: list[tuple[str, str | None, str | None]] = []
    left: list[str] = []

    async def stream(request: web.Request) -> web.StreamResponse:
        await request.read()
        seen.append((request.path, request.headers.get("Authorization"), request.headers.get("anthropic-version")))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        gone = lambda: request.transport is None or request.transport.is_closing()  # noqa: E731 (one short test)
        body = streams[request.path]
        cut = body.index(b"\n\n") + 2
        for piece in (body[:cut], body[cut:]):
            await poll_async(gone, GAP_S)  # silent: queueing and prefill, then a stall after the first event
            await resp.write(piece)
        await poll_async(gone, 30)  # the end of body held back until the client leaves
        left.append(request.path)
        return resp

    app = web.Application()
    for path in streams:
        app.router.add_post(path, stream)
    url, runner = await serve_app(app)
    relay = relay_factory(url, "--heartbeat-s", str(HEARTBEAT_S))
    try:
        async with aiohttp.ClientSession() as s:
            for path, expected in streams.items():
                last = events(expected)[-1].split(b"\n", 1)[0]  # `event: response.completed`, `event: message_stop`
                # the Messages API's key header, as the anthropic SDK sends it, and its version header
                headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
                resp = await s.post(relay.url + path, json={"model": "m", "stream": True}, headers=headers)
                assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream; charset=utf-8"
                got = b""
                async for line in resp.content:
                    got += line
                    if got.endswith(b"\n\n") and events(got) and events(got)[-1].startswith(last):
                        break
                resp.close()  # the client has the last event: it stops reading, and leaves
                assert events(got) == events(expected)  # every byte of every event, `event:` lines included
                assert got != expected  # ... with heartbeats between them
                await eventually(lambda p=path: p in left, 10, "the upstream closed for the client that left")
                await eventually(in_flight_is(relay.url, 0), 10, "the slot freed")
        assert await metric(relay.url, "loadproof_relay_heartbeats_total") >= 4
        assert await metric(relay.url, "loadproof_relay_client_disconnects_total") == 0
        rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
        assert [(r["path"], r["status"], r["outcome"], r["stream"]) for r in rows] == [
            (path, 200, "ok", True) for path in streams
        ]
        # no client key passed on; the version header only on the route that declares it (protocol.routes.messages)
        assert seen == [(route_of("responses").path, None, None), (route_of("messages").path, None, "2023-06-01")]
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_a_transcriptions_multipart_form_passes_byte_for_byte_with_its_boundary(relay_factory):  # noqa: F811 (the fixture imported above)
    seen: list[tuple[str | None, bytes]] = []

    async def transcribe(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append((request.headers.get("Content-Type"), body))
        return web.json_response({"text": "ok", "sha": hashlib.sha256(body).hexdigest()})

    app = web.Application()
    app.router.add_post(route_of("transcriptions").path, transcribe)
    url, runner = await serve_app(app)
    relay = relay_factory(url)
    try:
        async with aiohttp.ClientSession() as s:
            headers = {"Authorization": f"Bearer {KEY}", "Content-Type": FORM}
            async with s.post(relay.url + route_of("transcriptions").path, data=AUDIO_FORM, headers=headers) as r:
                assert r.status == 200, await r.text()
                answer = await r.json()
        assert seen == [(FORM, AUDIO_FORM)]
        assert answer["sha"] == hashlib.sha256(AUDIO_FORM).hexdigest()
        rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
        assert [(r["path"], r["outcome"]) for r in rows] == [(route_of("transcriptions").path, "ok")]
    finally:
        await runner.cleanup()
