"""Shared fixtures: a scriptable SSE server on 127.0.0.1 (real HTTP, real sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
import pytest_asyncio
from aiohttp import web


@dataclass
class Script:
    """What the server does for one request: status, then pieces of body with pauses between."""

    status: int = 200
    pieces: list[bytes] = field(default_factory=list)
    pause_s: float = 0.0
    drop_after: int | None = None  # close the connection after this many pieces, mid-stream
    hang_after: int | None = None  # stop sending (but keep the connection) after this many pieces
    silence_first_s: float = 0.0  # headers at once, then nothing for this long (queueing, prefill)


@dataclass
class SSEServer:
    url: str
    scripts: list[Script]
    bodies: list[bytes]
    disconnects: list[str]


@pytest_asyncio.fixture
async def sse_server() -> AsyncIterator[Callable[[list[Script]], SSEServer]]:
    runners: list[web.AppRunner] = []

    async def start(scripts: list[Script]) -> SSEServer:
        queue = list(scripts)
        state = SSEServer(url="", scripts=scripts, bodies=[], disconnects=[])

        async def handle(request: web.Request) -> web.StreamResponse:
            state.bodies.append(await request.read())
            script = queue.pop(0) if len(queue) > 1 else queue[0]
            if script.status != 200:
                return web.Response(status=script.status, body=b"".join(script.pieces),
                                    content_type="application/json")
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            try:
                if script.silence_first_s:
                    await asyncio.sleep(script.silence_first_s)
                for i, piece in enumerate(script.pieces):
                    if script.drop_after is not None and i == script.drop_after:
                        request.transport.close()
                        return resp
                    if script.hang_after is not None and i == script.hang_after:
                        # silent but connected, as a hung engine is; notice when the client leaves
                        while request.transport is not None and not request.transport.is_closing():
                            await asyncio.sleep(0.02)
                        state.disconnects.append(request.path)
                        return resp
                    await resp.write(piece)
                    if script.pause_s:
                        await asyncio.sleep(script.pause_s)
                await resp.write_eof()
            except (ConnectionResetError, asyncio.CancelledError):
                state.disconnects.append(request.path)
                raise
            return resp

        app = web.Application()
        app.router.add_post("/v1/completions", handle)
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        state.url = f"http://127.0.0.1:{port}"
        return state

    yield start
    for runner in runners:
        await runner.cleanup()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("asyncio") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(60))
