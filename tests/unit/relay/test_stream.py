"""relay.stream.StreamWatch over the streams of every API the relay forwards, split at every byte: where an
event ends, whether the engine sent an error event, and whether the stream's last event has gone out."""

from __future__ import annotations

import pytest

from loadproof.protocol.routes import route_names, route_of
from loadproof.relay.config import RelayConfig
from loadproof.relay.http import parse_request_head
from loadproof.relay.state import RelayState
from loadproof.relay.stream import StreamWatch

CHAT = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
# as vLLM 0.32 writes them: an `event:` line, then the data
RESPONSES = (
    b'event: response.created\ndata: {"type":"response.created","response":{"status":"in_progress"}}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"event: x"}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":{"status":"completed",'
    b'"output":[{"content":[{"text":"event: error"}]}],"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
)
MESSAGES = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":1}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
MESSAGES_ERROR = (
    b'event: message_start\ndata: {"type":"message_start"}\n\n'
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"x"}}\n\n'
)


def ends(name: str) -> frozenset[bytes]:
    return frozenset(e.encode() for e in route_of(name).end_events)


def watch(stream: bytes, cuts: list[int], end_events: frozenset[bytes] = frozenset()) -> list[StreamWatch]:
    """The watch after each read of `stream` cut at `cuts`."""
    w = StreamWatch(end_events)
    seen = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)]):
        w.feed(stream[a:b])
        seen.append((w.at_boundary, w.done_sent, w.error_event))
    return seen  # type: ignore[return-value]  # tuples of the watch's flags, for the asserts


@pytest.mark.parametrize(("stream", "route"), [(CHAT, "chat"), (RESPONSES, "responses"), (MESSAGES, "messages")])
def test_the_last_event_is_seen_gone_out_at_every_split_and_only_at_the_end(stream, route):
    for cut in range(1, len(stream)):
        flags = watch(stream, [cut], ends(route))
        assert flags[-1] == (True, True, False), (route, cut)  # whole: ended, no error (text saying `event: error`)
        before = watch(stream[:-1], [cut] if cut < len(stream) - 1 else [], ends(route))
        assert not before[-1][1], (route, cut)  # one byte short: not yet


def test_an_event_route_does_not_end_at_an_earlier_event_or_at_done():
    first = RESPONSES.index(b"event: response.output_text.delta")
    assert watch(RESPONSES[:first], [], ends("responses"))[-1] == (True, False, False)
    assert watch(CHAT, [], ends("messages"))[-1][1] is False  # its end is message_stop, not [DONE]


def test_an_error_event_of_an_api_of_named_events_is_seen_at_every_split():
    for cut in range(1, len(MESSAGES_ERROR)):
        assert watch(MESSAGES_ERROR, [cut], ends("messages"))[-1][2], cut
    assert not watch(MESSAGES, [], ends("messages"))[-1][2]


def test_every_generating_route_ends_with_done_or_names_its_last_events():
    for name in route_names():
        route = route_of(name)
        assert (route.done_payload is None) == bool(route.end_events), name


def test_a_requests_content_type_and_its_routes_headers_reach_the_upstream_and_nothing_else():
    state = RelayState(RelayConfig(upstream="http://engine:8000"))
    form = "multipart/form-data; boundary=loadproof-form-4f1c9a7e2b6d8053"
    req = parse_request_head(
        f"POST {route_of('transcriptions').path} HTTP/1.1\r\ncontent-type: {form}\r\nx-api-key: sk-client\r\n".encode()
        + b"content-length: 10"
    )
    head = state.upstream_head(req.method, req.path, 10, state.passed_fields(req))
    assert head.endswith(f"content-type: {form}\r\ncontent-length: 10\r\n\r\n".encode())
    assert b"sk-client" not in head and head.count(b"content-type") == 1
    msg = parse_request_head(
        f"POST {route_of('messages').path} HTTP/1.1\r\nanthropic-version: 2023-06-01\r\nx-other: 1\r\n".encode()
        + b"content-type: application/octet-stream"  # a JSON body as aiohttp labels bytes: JSON to the engine
    )
    head = state.upstream_head(msg.method, msg.path, 2, state.passed_fields(msg))
    assert b"content-type: application/json\r\nanthropic-version: 2023-06-01\r\n" in head and b"x-other" not in head
    assert b"octet-stream" not in head
    assert state.upstream_head("GET", "/v1/models", None, b"").endswith(b"accept: */*\r\n\r\n")


def test_every_routes_path_is_served_and_the_anthropic_key_header_is_a_key():
    state = RelayState(RelayConfig(upstream="http://engine:8000", api_keys=("sk-1",)))
    assert {route_of(n).path for n in route_names()} <= {p for p, m in state.paths.items() if m == "POST"}
    assert state.authorized({"x-api-key": "sk-1"}) and state.authorized({"authorization": "Bearer sk-1"})
    assert not state.authorized({"x-api-key": "sk-2"}) and not state.authorized({})
