"""Each API's streamed events read into the same Reading: text, reasoning, tool calls, usage, the finish
reason and the end; an in-band error fails the request. The events are in the shapes vLLM 0.32 sends
(vllm/entrypoints/openai/responses/streaming_events.py, vllm/entrypoints/anthropic/serving.py)."""

from __future__ import annotations

import json

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
