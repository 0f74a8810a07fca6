"""Each route adapter's server side reads what its client side writes, and its client side reads what its server
side streams: encode -> parse -> encode gives the same body, and a stream written by the adapter's `Writer` (as the
simulator serves it) read back by its `feed` gives the answer's text, reasoning, usage and finish reason."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.errors import StreamError
from loadproof.protocol.media import MediaError, audio_of, image_of
from loadproof.protocol.request import Message, Text
from loadproof.protocol.routes import ROUTES, Request, request_of, route_of
from loadproof.protocol.routes.base import Answer, BadRequest
from loadproof.protocol.routes.reading import Reading
from loadproof.protocol.sse import SSEDecoder
from loadproof.records import RequestRecord
from tests.unit.protocol.media_files import png, wav

IMAGE = image_of(png(8, 6))
AUDIO = audio_of(wav(0.5))
TOOLS = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]


def request(route: str) -> Request:
    """A request of what `route` carries: a conversation with an image where it takes images, audio for a
    transcription, a prompt for completions, texts for a pooling route."""
    r = route_of(route)
    media = (AUDIO,) if not r.conversational and "audio" in r.media else (IMAGE,) if "image" in r.media else ()
    if not r.generates:
        return request_of(route, "m", inputs=["query", "a", "b"])
    if not r.conversational:
        if media:
            return request_of(route, "m", messages=[Message("user", (Text("context"), *media))], max_tokens=6)
        return request_of(route, "m", "hello", max_tokens=6, ignore_eos=True, seed=3)
    messages = [
        Message.text("system", "be brief"),
        Message("user", (Text("what is this?"), *media)),
        Message.text("assistant", "a picture"),
        Message.text("user", "more"),
    ]
    tools = {"tools": TOOLS} if "tools" in r.constraints else {}
    return request_of(route, "m", messages=messages, max_tokens=6, temperature=0.5, extra=tools)


@pytest.mark.parametrize("name", ROUTES.in_order())
def test_parse_is_the_inverse_of_encode(name: str):
    route = route_of(name)
    body = route.encode(request(name))
    parsed = route.parse(body, route.content_type)
    assert route.encode(parsed) == body
    assert parsed.media() == request(name).media()


def stream_of(name: str, tokens: str, reasoning: int, finish: str) -> RequestRecord:
    """The record the client makes of a stream the route's writer sends: `tokens` one a token, the first
    `reasoning` of them reasoning; 10 prompt tokens, 4 of them cached."""
    route = route_of(name)
    req = route.parse(route.encode(request(name)), route.content_type)
    answer = Answer("id1", "m", 1, prompt_tokens=10)
    writer = route.writer(req, answer)
    out = writer.open()
    for k, piece in enumerate(tokens):
        last = k == len(tokens) - 1
        answer.cached_tokens, answer.output_tokens = 4, k + 1
        answer.reasoning_tokens = min(k + 1, reasoning)
        answer.finish_reason = finish if last else None
        out += writer.piece(piece, k < reasoning)
    out += writer.close()
    reading = Reading()
    for now, payload in enumerate(SSEDecoder().feed(out)):
        if payload == route.done_payload:
            reading.done = True
            continue
        route.feed(reading, payload, now)
    record = RequestRecord(request_id="r", endpoint=name)
    reading.into(record)
    assert reading.done
    return record


@pytest.mark.parametrize("name", [n for n in ROUTES.in_order() if route_of(n).generates])
def test_what_the_writer_streams_the_client_reads(name: str):
    thinks = route_of(name).conversational  # a route of conversations may stream reasoning first
    record = stream_of(name, "abcdef", 2 if thinks else 0, "length")
    assert record.output_text == ("cdef" if thinks else "abcdef")
    assert (record.reasoning_text or "") == ("ab" if thinks else "")
    assert (record.prompt_tokens, record.output_tokens, record.finish_reason) == (10, 6, "length")
    # every API's usage says the cached part of the prompt but a transcription's (vLLM's has no such field)
    assert record.cached_tokens == (None if name == "transcriptions" else 4)
    assert record.first_token_ns is not None and record.last_token_ns is not None


@pytest.mark.parametrize("name", [n for n in ROUTES.in_order() if route_of(n).generates])
def test_a_stream_that_ends_by_itself_reads_as_stopped(name: str):
    assert stream_of(name, "xy", 0, "stop").finish_reason == "stop"


@pytest.mark.parametrize("name", [n for n in ROUTES.in_order() if route_of(n).generates])
def test_an_error_mid_stream_fails_the_read(name: str):
    route = route_of(name)
    req = route.parse(route.encode(request(name)), route.content_type)
    writer = route.writer(req, Answer("id1", "m", 1, prompt_tokens=3))
    (payload,) = [p for p in SSEDecoder().feed(writer.error("engine broke")) if p]
    with pytest.raises(StreamError, match="engine broke"):
        route.feed(Reading(), payload, 0)


@pytest.mark.parametrize("name", [n for n in ROUTES.in_order() if route_of(n).generates])
def test_a_whole_answer_is_the_apis_json(name: str):
    route = route_of(name)
    answer = Answer("id1", "m", 1, prompt_tokens=10, output_tokens=3, finish_reason="stop")
    body = route.whole(request(name), answer, "abc", "")
    assert "abc" in str(body)


@pytest.mark.parametrize("name", [n for n in ROUTES.in_order() if route_of(n).pooling])
def test_a_pooled_answer_reads_back_its_items(name: str):
    route = route_of(name)
    req = route.parse(route.encode(request(name)), route.content_type)
    body = route.pooled(req, Answer("id1", "m", 1, prompt_tokens=9), lambda text: [1.0, 0.0])
    record = RequestRecord(request_id="r", endpoint=name, end_ns=5)
    route.answer(record, msgspec.json.encode(body))
    assert record.prompt_tokens == 9 and record.vectors == len(req.inputs) - route.extra_inputs


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("chat", b"not json", "not valid JSON"),
        ("chat", b'{"messages": []}', "messages must be a non-empty list"),
        ("completions", b'{"prompt": 3}', "prompt must be a string"),
        ("responses", b'{"input": 3}', "input must be a string"),
        ("messages", b'{"messages": [{"role": "user", "content": [{"type": "video"}]}]}', "a content block of type"),
        ("embeddings", b'{"input": []}', "input must be a string or a non-empty list"),
        ("rerank", b'{"query": "q"}', "query must be a string"),
        ("chat", b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}', "must be numbers"),
    ],
)
def test_a_body_a_route_cannot_read_is_one_line(name: str, body: bytes, message: str):
    with pytest.raises(BadRequest, match=message):
        route_of(name).parse(body, "application/json")


def test_media_that_is_not_what_it_says_is_a_media_error():
    bad = b'{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}'
    with pytest.raises(MediaError, match="not a PNG or JPEG"):
        route_of("chat").parse(bad, "application/json")
    route = route_of("transcriptions")
    with pytest.raises(BadRequest, match="multipart/form-data"):
        route.parse(b"{}", "application/json")
