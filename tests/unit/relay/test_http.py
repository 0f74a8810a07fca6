"""The relay's HTTP/1.1 framing: request heads it accepts and refuses, chunked bodies over any split, the request
line it sends upstream."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadproof.relay.config import RelayConfig
from loadproof.relay.http import BadMessage, ChunkedDecoder, parse_request_head, parse_response_head, response_head
from loadproof.relay.state import ENGINE_METRICS, RelayState


def test_a_request_head_as_clients_send_it():
    req = parse_request_head(
        b"POST /v1/completions?x=1 HTTP/1.1\r\nHost: r\r\nContent-Length: 12\r\n"
        b"Authorization: Bearer k\r\nExpect: 100-continue\r\nX-A: 1\r\nx-a: 2"
    )
    assert (req.method, req.path, req.http11, req.keep_alive) == ("POST", "/v1/completions", True, True)
    assert (req.content_length, req.chunked, req.expect_continue) == (12, False, True)
    assert req.headers["authorization"] == "Bearer k" and req.headers["x-a"] == "1, 2"
    assert not parse_request_head(b"GET /health HTTP/1.1\r\nConnection: Close").keep_alive
    assert not parse_request_head(b"GET /health HTTP/1.0\r\nConnection: keep-alive").keep_alive
    assert parse_request_head(b"GET http://relay:8080/v1/models HTTP/1.1\r\nHost: r").path == "/v1/models"
    chunked = parse_request_head(b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: Chunked")
    assert chunked.chunked and chunked.content_length is None


@pytest.mark.parametrize(
    "head, status",
    [
        (b"GARBAGE", 400),
        (b"GET  /health HTTP/1.1", 400),
        (b"GET /health HTTP/2.0", 505),
        (b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6", 400),  # which one?
        (b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked", 400),  # how requests get smuggled
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked", 400),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked", 501),
        (b"POST / HTTP/1.1\r\nContent-Length: -1", 400),
        (b"POST / HTTP/1.1\r\nContent-Length: \xb2", 400),  # a digit to str.isdigit, not to HTTP
        (b"GET / HTTP/1.1\r\nHost : r", 400),
        (b"GET / HTTP/1.1\r\nX: 1\r\n folded", 400),
    ],
)
def test_request_heads_that_are_refused(head, status):
    with pytest.raises(BadMessage) as err:
        parse_request_head(head)
    assert err.value.status == status


def test_response_heads():
    assert parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream")[0:2] == (200, True)
    with pytest.raises(BadMessage):
        parse_response_head(b"ICY 200 OK")
    head = response_head(429, "application/json", length=3, close=True)
    assert head.startswith(b"HTTP/1.1 429 Too Many Requests\r\n") and head.endswith(b"connection: close\r\n\r\n")
    assert b"content-length: 3\r\n" in head and b"transfer-encoding" not in head


def encode_chunked(body: bytes, sizes: list[int], trailers: bool, extension: bool) -> bytes:
    out, pos = b"", 0
    for size in sizes:
        piece = body[pos : pos + size]
        if not piece:
            break
        out += b"%X%s\r\n%s\r\n" % (len(piece), b";name=value" if extension else b"", piece)
        pos += len(piece)
    if pos < len(body):
        out += b"%x\r\n%s\r\n" % (len(body) - pos, body[pos:])
    return out + b"0\r\n" + (b"Trailer-A: 1\r\nTrailer-B: 2\r\n" if trailers else b"") + b"\r\n"


@settings(max_examples=300)
@given(
    st.binary(max_size=300),
    st.lists(st.integers(min_value=1, max_value=40), max_size=12),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
    st.booleans(),
    st.booleans(),
)
def test_chunked_body_over_any_split(body, sizes, cuts, trailers, extension):
    after = b"GET /next HTTP/1.1\r\n\r\n"  # a pipelined request: left over as `rest`
    stream = encode_chunked(body, sizes, trailers, extension) + after
    decoder, out, last = ChunkedDecoder(), [], 0
    for cut in sorted({c % (len(stream) + 1) for c in cuts}) + [len(stream)]:
        if not decoder.done:
            out += decoder.feed(stream[last:cut])
        else:
            decoder.rest += stream[last:cut]
        last = cut
    assert decoder.done and b"".join(out) == body and decoder.rest == after


@pytest.mark.parametrize(
    "stream", [b"zz\r\nab\r\n", b"+5\r\nabcde\r\n", b"0x5\r\nabcde\r\n", b"1_0\r\n", b"3\r\nabcX\r\n", b"f" * 2000]
)
def test_malformed_chunks_are_refused(stream):
    with pytest.raises(BadMessage):
        ChunkedDecoder().feed(stream)


@pytest.mark.parametrize(
    ("upstream", "line"),
    [
        ("http://engine:8000", b"GET /metrics HTTP/1.1\r\nhost: engine:8000\r\n"),
        ("http://gw/llm/", b"GET /llm/metrics HTTP/1.1\r\nhost: gw\r\n"),
        ("https://user:pw@gw:8443/a/b", b"GET /a/b/metrics HTTP/1.1\r\nhost: gw:8443\r\n"),
    ],
)
def test_the_upstream_request_line_keeps_the_path_prefix_of_the_upstream_url(upstream, line):
    state = RelayState(RelayConfig(upstream=upstream))
    assert state.upstream_head("GET", ENGINE_METRICS, None).startswith(line)
