"""Each API's streamed events read into the same Reading: text, reasoning, tool calls, usage, the finish
reason and the end; an in-band error fails the request. The events are in the shapes vLLM 0.32 sends
(vllm/entrypoints/openai/responses/streaming_events.py, vllm/entrypoints/anthropic/serving.py)."""

from __future__ import annotations

import json

import msgspec
import pytest

from loadproof.errors import StreamError
from loadproof.protocol.routes import route_of
from loadproof.protocol.routes.reading import Reading
from loadproof.records import RequestRecord


def read(route: str, events: list[dict]) -> tuple[Reading, RequestRecord]:
    reading = Reading()
    adapter = route_of(route)
    for i, event in enumerate(events):
        adapter.feed(reading, json.dumps(event).encode(), 1_000 * (i + 1))
    record = RequestRecord(request_id="r", endpoint=route)
    reading.into(record)
    return reading, record


RESPONSES = [
    {"type": "response.created", "response": {"status": "in_progress"}},
    {"type": "response.reasoning_text.delta", "delta": "think", "output_index": 0},
    {"type": "response.output_text.delta", "delta": "Hel", "output_index": 1},
    {"type": "response.output_text.delta", "delta": "lo", "output_index": 1},
    {
        "type": "response.output_item.added",
        "output_index": 2,
        "item": {"type": "function_call", "call_id": "c1", "name": "get"},
    },
    {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": '{"a":'},
    {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": " 1}"},
    {
        "type": "response.completed",
        "response": {
            "status": "completed",
            "usage": {
                "input_tokens": 11,
                "output_tokens": 6,
                "input_tokens_details": {"cached_tokens": 8},
                "output_tokens_details": {"reasoning_tokens": 1},
            },
        },
    },
]


def test_a_responses_stream_reads_text_reasoning_calls_and_the_final_usage():
    reading, record = read("responses", RESPONSES)
    assert reading.done
    assert record.output_text == "Hello" and record.reasoning_text == "think"
    assert [(c.id, c.name, c.arguments) for c in record.tool_calls] == [("c1", "get", '{"a": 1}')]
    assert (record.prompt_tokens, record.output_tokens, record.cached_tokens) == (11, 6, 8)
    assert record.engine_reasoning_tokens == 1 and record.finish_reason == "tool_calls"
    assert record.first_token_ns == 2_000 and record.first_answer_ns == 3_000  # reasoning came first
    assert record.chunk_ns == [2_000, 3_000, 4_000, 6_000, 7_000] and not record.chunk_usage


def test_an_incomplete_response_stopped_by_its_budget_finishes_with_length():
    events = [
        {"type": "response.output_text.delta", "delta": "a"},
        {
            "type": "response.incomplete",
            "response": {
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        },
    ]
    reading, record = read("responses", events)
    assert reading.done and record.finish_reason == "length" and record.output_tokens == 1


MESSAGES = [
    {
        "type": "message_start",
        "message": {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "content": [],
            "usage": {"input_tokens": 9, "output_tokens": 0},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "t1", "name": "get", "input": {}},
    },
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"a": 2}'}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"input_tokens": 9, "output_tokens": 5}},
    {"type": "message_stop"},
]


def test_a_messages_stream_reads_text_thinking_tool_use_and_both_usages():
    reading, record = read("messages", MESSAGES)
    assert reading.done
    assert record.output_text == "Hi" and record.reasoning_text == "hmm"
    assert [(c.id, c.name, c.arguments) for c in record.tool_calls] == [("t1", "get", '{"a": 2}')]
    assert (record.prompt_tokens, record.output_tokens) == (9, 5) and record.finish_reason == "tool_calls"
    assert record.first_token_ns == 3_000 and record.first_answer_ns == 6_000


def test_a_messages_stream_without_its_stop_event_is_not_done():
    reading, _ = read("messages", MESSAGES[:-1])
    assert not reading.done  # the client turns this into "stream ended before its end event"


@pytest.mark.parametrize(
    ("route", "event", "message"),
    [
        ("responses", {"type": "error", "message": "bad input", "code": "x"}, "bad input"),
        (
            "responses",
            {"type": "response.failed", "response": {"status": "failed", "error": {"message": "boom"}}},
            "boom",
        ),
        ("messages", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, "busy"),
    ],
)
def test_an_in_band_error_fails_the_request_in_its_own_words(route, event, message):
    with pytest.raises(StreamError, match=message):
        read(route, [event])


@pytest.mark.parametrize("route", ["responses", "messages", "chat"])
def test_an_undecodable_event_fails_the_request(route):
    with pytest.raises(StreamError, match="undecodable event"):
        route_of(route).feed(Reading(), b"{not json", 1)


def _chat_chunk(delta: dict, completion: int, finish: str | None = None, details: bool = False) -> bytes:
    usage: dict = {"prompt_tokens": 9, "completion_tokens": completion, "total_tokens": 9 + completion}
    if details:
        usage["prompt_tokens_details"] = {"cached_tokens": 4}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"choices": [choice], "usage": usage}).encode()


CHAT = [
    _chat_chunk({"role": "assistant", "content": ""}, 0),
    _chat_chunk({"reasoning": "hm"}, 1),
    _chat_chunk({"content": "a"}, 2),
    _chat_chunk({"content": "b"}, 3),
    _chat_chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}, 4),
    _chat_chunk({"content": "c"}, 5),
    _chat_chunk({"content": "d"}, 6, finish="length"),
    json.dumps(
        {
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 6, "prompt_tokens_details": {"cached_tokens": 4}},
        }
    ).encode(),
    b"[DONE]",
]


@pytest.mark.parametrize("splits", [[9], [1, 8], [3, 3, 3], [1] * 9])
def test_a_chat_stream_read_a_read_at_a_time_is_read_as_event_by_event(splits):
    """The chat-shaped routes read a read's chunks in one pass (`feed_all`, the client's hot loop, with its own
    path for plain answer chunks): every split of the stream into reads gives the record that reading each event
    alone does."""
    route = route_of("chat")
    alone = Reading()
    for i, payload in enumerate(CHAT):
        if payload == b"[DONE]":
            alone.done = True
        else:
            route.feed(alone, payload, 1_000 * (i + 1))
    batched, at = Reading(), 0
    for size in splits:
        route.feed_all(batched, CHAT[at : at + size], 1_000 * (at + size))  # a read's events share its time
        at += size
    one, other = RequestRecord(request_id="r", endpoint="chat"), RequestRecord(request_id="r", endpoint="chat")
    alone.into(one)
    batched.into(other)
    assert batched.done and alone.done
    assert (other.output_text, other.reasoning_text, other.tool_calls) == ("abcd", "hm", one.tool_calls)
    assert (other.output_tokens, other.prompt_tokens, other.cached_tokens, other.finish_reason) == (6, 9, 4, "length")
    assert other.chunk_tokens == one.chunk_tokens == [1, 1, 1, 1, 1, 1]
    assert (other.first_token_ns is not None, other.num_chunks) == (True, one.num_chunks)
    if splits == [1] * 9:  # each event its own read: the same times too
        assert msgspec.structs.asdict(other) == msgspec.structs.asdict(one)
