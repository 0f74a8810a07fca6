"""The streaming client against a scripted SSE server on 127.0.0.1, timed by a scripted clock."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from loadproof.client import RequestSpec, StreamingClient
from loadproof.protocol.routes import request_body
from loadproof.protocol.sse import DONE_EVENT, encode_comment, encode_data
from loadproof.records import RequestRecord
from tests.conftest import Script
from tests.polling import eventually
from tests.sse_chunks import chat_chunk, completion_chunk, usage_only


def scripted_clock(step_ns: int = 1_000):
    """Each reading is later than the last by a growing step, so every gap is distinct."""
    counter = itertools.count(1)
    total = 0

    def clock() -> int:
        nonlocal total
        total += step_ns * next(counter)
        return total

    return clock


def spec(endpoint: str = "completions", deadline_s: float | None = None) -> RequestSpec:
    body = request_body(endpoint, "m", "hello", max_tokens=16)
    return RequestSpec(request_id="r1", endpoint=endpoint, body=body, deadline_s=deadline_s)


async def one(url: str, s: RequestSpec | None = None, **kw) -> RequestRecord:
    async with StreamingClient(url, **kw) as client:
        return await client.stream(s or spec())


@pytest.mark.asyncio
async def test_accounting_identity_with_a_scripted_clock(sse_server):
    pieces = [
        completion_chunk("", 0),
        completion_chunk("Hel", 1),
        completion_chunk("lo", 2),
        completion_chunk(" wor", 4),
        completion_chunk("ld", 5, finish="length"),
        usage_only(5),
        DONE_EVENT,
    ]
    server = await sse_server([Script(pieces=pieces, pause_s=0.01)])
    rec = await one(server.url, clock=scripted_clock())
    assert rec.ok, rec.error_message
    assert rec.latency_ns - rec.ttft_ns == sum(rec.itl_ns())
    assert rec.ttft_ns == rec.first_token_ns - rec.send_ns > 0
    assert rec.output_tokens == 5 and rec.prompt_tokens == 7
    assert sum(rec.chunk_tokens) == 5
    assert rec.output_text == "Hello world"
    assert rec.finish_reason == "length"
    assert rec.end_ns > rec.last_token_ns
    assert rec.cached_tokens is None  # the engine did not say


@pytest.mark.asyncio
async def test_the_engines_cached_prompt_tokens_are_recorded(sse_server):
    pieces = [
        completion_chunk("a", 1, prompt_tokens=300),
        usage_only(1, prompt_tokens=300, cached_tokens=256),
        DONE_EVENT,
    ]
    server = await sse_server([Script(pieces=pieces)])
    rec = await one(server.url)
    assert rec.ok and rec.prompt_tokens == 300 and rec.cached_tokens == 256


@pytest.mark.asyncio
async def test_several_tokens_in_one_chunk_are_counted_from_usage(sse_server):
    pieces = [completion_chunk("a", 1) + completion_chunk("bcd", 4), completion_chunk("e", 7), DONE_EVENT]
    server = await sse_server([Script(pieces=pieces, pause_s=0.01)])
    rec = await one(server.url)
    assert rec.output_tokens == 7
    assert rec.chunk_tokens[-1] == 3 and sum(rec.chunk_tokens) == 7
    assert rec.num_chunks == 3


@pytest.mark.asyncio
async def test_first_token_is_the_first_non_empty_content_or_reasoning(sse_server):
    pieces = [
        chat_chunk(content="", completion_tokens=0),
        chat_chunk(reasoning="think", completion_tokens=1),
        chat_chunk(content="answer", completion_tokens=2),
        DONE_EVENT,
    ]
    server = await sse_server([Script(pieces=pieces, pause_s=0.02)])
    rec = await one(server.url, spec("chat"))
    assert rec.ok
    assert rec.first_token_ns == rec.chunk_ns[0]  # the reasoning chunk, not the empty one
    assert rec.first_answer_ns == rec.chunk_ns[1]
    assert rec.output_text == "answer" and rec.reasoning_text == "think"
    assert rec.output_tokens == 2 and rec.reasoning_tokens == 1 and rec.answer_tokens == 1
    assert rec.ttfa_ns > rec.ttft_ns


@pytest.mark.asyncio
async def test_tool_call_pieces_are_joined_by_index(sse_server):
    pieces = [
        chat_chunk(reasoning="plan", completion_tokens=1),
        chat_chunk(
            tool_calls=[
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
            ],
            completion_tokens=2,
        ),
        chat_chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"city": '}}], completion_tokens=4),
        chat_chunk(
            tool_calls=[{"index": 1, "id": "call_2", "function": {"name": "get_time", "arguments": "{}"}}],
            completion_tokens=6,
        ),
        chat_chunk(tool_calls=[{"index": 0, "function": {"arguments": '"Oslo"}'}}], completion_tokens=7),
        DONE_EVENT,
    ]
    server = await sse_server([Script(pieces=pieces)])
    rec = await one(server.url, spec("chat"))
    assert rec.ok and rec.output_text == ""
    assert [(c.name, c.arguments, c.id) for c in rec.tool_calls] == [
        ("get_weather", '{"city": "Oslo"}', "call_1"),
        ("get_time", "{}", "call_2"),
    ]
    assert rec.first_answer_ns == rec.chunk_ns[1]  # the first tool-call piece is the answer's start
    assert rec.first_token_ns == rec.chunk_ns[0]
    assert rec.reasoning_tokens == 1 and rec.output_tokens == 7
    assert sum(rec.chunk_tokens) == 7


@pytest.mark.asyncio
async def test_an_answer_of_tool_calls_alone_has_a_first_token(sse_server):
    pieces = [
        chat_chunk(content="", completion_tokens=0),
        chat_chunk(
            tool_calls=[{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{"}}], completion_tokens=3
        ),
        chat_chunk(tool_calls=[{"index": 0, "function": {"arguments": "}"}}], completion_tokens=4),
        DONE_EVENT,
    ]
    server = await sse_server([Script(pieces=pieces)])
    rec = await one(server.url, spec("chat"))
    assert rec.ok and rec.output_text == "" and rec.reasoning_tokens is None
    assert rec.first_token_ns == rec.first_answer_ns == rec.chunk_ns[0]
    assert rec.last_token_ns == rec.chunk_ns[-1] and rec.chunk_tokens == [3, 1]
    assert rec.tool_calls[0].arguments == "{}"


@pytest.mark.asyncio
async def test_in_band_error_event_makes_a_200_stream_a_failure(sse_server):
    error = encode_data(json.dumps({"error": {"message": "engine dead", "type": "server_error"}}).encode())
    server = await sse_server([Script(pieces=[completion_chunk("x", 1), error, DONE_EVENT])])
    rec = await one(server.url)
    assert not rec.ok
    assert rec.error_kind == "stream_error" and "engine dead" in rec.error_message
    assert rec.http_status == 200
    assert rec.output_tokens == 1  # what arrived before the error is kept


@pytest.mark.asyncio
async def test_old_style_error_object_is_recognised(sse_server):
    error = encode_data(json.dumps({"object": "error", "message": "bad things"}).encode())
    server = await sse_server([Script(pieces=[error, DONE_EVENT])])
    rec = await one(server.url)
    assert rec.error_kind == "stream_error" and "bad things" in rec.error_message


@pytest.mark.asyncio
async def test_http_error_carries_status_and_message(sse_server):
    body = json.dumps({"error": {"message": "prompt is too long", "code": 400}}).encode()
    server = await sse_server([Script(status=400, pieces=[body])])
    rec = await one(server.url)
    assert not rec.ok and rec.error_kind == "http_status" and rec.http_status == 400
    assert rec.error_message == "HTTP 400: prompt is too long"


@pytest.mark.asyncio
async def test_connection_dropped_mid_stream_is_a_disconnect(sse_server):
    pieces = [completion_chunk("a", 1), completion_chunk("b", 2), DONE_EVENT]
    server = await sse_server([Script(pieces=pieces, drop_after=1)])
    rec = await one(server.url)
    assert not rec.ok and rec.error_kind == "disconnect"
    assert rec.output_tokens == 1


@pytest.mark.asyncio
async def test_stream_without_done_is_a_disconnect(sse_server):
    server = await sse_server([Script(pieces=[completion_chunk("a", 1)])])
    rec = await one(server.url)
    assert rec.error_kind == "disconnect" and "[DONE]" in rec.error_message


@pytest.mark.asyncio
async def test_deadline_gives_a_timeout_record(sse_server):
    server = await sse_server([Script(pieces=[completion_chunk("a", 1), DONE_EVENT], hang_after=1)])
    rec = await one(server.url, spec(deadline_s=0.3))
    assert rec.error_kind == "timeout"
    assert rec.output_tokens == 1 and rec.first_token_ns is not None


@pytest.mark.asyncio
async def test_cancellation_keeps_the_partial_record_then_reraises(sse_server):
    server = await sse_server([Script(pieces=[completion_chunk("a", 1), DONE_EVENT], hang_after=1)])
    seen: list[RequestRecord] = []
    async with StreamingClient(server.url, on_record=seen.append) as client:
        live = RequestRecord(request_id="r1", endpoint="completions")
        task = asyncio.create_task(client.stream(spec(), live))
        await eventually(lambda: live.chunk_tokens, 10, "the first chunk arrived")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert len(seen) == 1
    assert seen[0].error_kind == "cancelled" and seen[0].chunk_tokens == [1]
    await eventually(lambda: server.disconnects, 10, "closing our side reached the server")


@pytest.mark.asyncio
async def test_heartbeats_are_counted_and_ignored(sse_server):
    pieces = [encode_comment("ping"), completion_chunk("a", 1), encode_comment(), DONE_EVENT]
    server = await sse_server([Script(pieces=pieces)])
    rec = await one(server.url)
    assert rec.ok and rec.num_heartbeats == 2 and rec.output_tokens == 1


@pytest.mark.asyncio
async def test_request_asks_for_usage_on_every_chunk_and_sends_the_key(sse_server):
    server = await sse_server([Script(pieces=[completion_chunk("a", 1), DONE_EVENT])])
    rec = await one(server.url, api_key="sk-test")
    body = json.loads(server.bodies[0])
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert rec.ok


@pytest.mark.asyncio
async def test_no_per_chunk_usage_is_flagged(sse_server):
    pieces = [completion_chunk("a", None), completion_chunk("b", None), usage_only(2), DONE_EVENT]
    server = await sse_server([Script(pieces=pieces)])
    rec = await one(server.url)
    assert rec.ok and rec.output_tokens == 2
    assert rec.chunk_usage is False
