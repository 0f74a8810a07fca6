"""A request's own headers (a session's id, `--session-header`) reach the server beside the route's, which they
never override."""

from __future__ import annotations

import pytest

from loadproof.client import RequestSpec, StreamingClient
from loadproof.protocol.routes import request_body
from loadproof.protocol.sse import DONE_EVENT
from tests.conftest import Script
from tests.sse_chunks import completion_chunk

pytestmark = pytest.mark.timeout(30)


@pytest.mark.asyncio
async def test_a_requests_headers_reach_the_server_and_never_override_the_routes(sse_server):
    server = await sse_server([Script(pieces=[completion_chunk("a", 1), DONE_EVENT])])
    body = request_body("completions", "m", "hi", max_tokens=1)
    async with StreamingClient(server.url) as client:
        own = RequestSpec("r1", "completions", body, headers={"x-session-id": "abc-3", "Content-Type": "text/plain"})
        plain = RequestSpec("r2", "completions", body)
        assert (await client.stream(own)).ok and (await client.stream(plain)).ok
    first, second = server.headers
    assert first["x-session-id"] == "abc-3" and first["Content-Type"] == "application/json"
    assert "x-session-id" not in second
