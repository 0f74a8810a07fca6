"""The SSE codec under arbitrary byte splits, line endings, comments and multi-byte characters."""

from hypothesis import given, settings
from hypothesis import strategies as st

from loadproof.protocol.sse import DONE_EVENT, HEARTBEAT, SSEDecoder, encode_comment, encode_data

payloads = st.lists(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=40).map(
        lambda s: s.encode("utf-8")
    ),
    max_size=12,
)


def feed_in_pieces(stream: bytes, cuts: list[int]) -> tuple[list[bytes], SSEDecoder]:
    decoder = SSEDecoder()
    out: list[bytes] = []
    bounds = sorted({c % (len(stream) + 1) for c in cuts}) if stream else []
    last = 0
    for b in bounds + [len(stream)]:
        out += decoder.feed(stream[last:b])
        last = b
    return out, decoder


@settings(max_examples=300)
@given(
    payloads,
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
    st.sampled_from([None, HEARTBEAT, encode_comment("keep-alive")]),
)
def test_any_split_and_line_ending_yields_the_same_events(items, cuts, eol, heartbeat):
    stream = b""
    for item in items:
        if heartbeat:
            stream += heartbeat
        stream += encode_data(item)
    stream += DONE_EVENT
    stream = stream.replace(b"\n", eol)
    events, decoder = feed_in_pieces(stream, cuts)
    assert events == items + [b"[DONE]"]
    assert decoder.num_heartbeats == (len(items) if heartbeat else 0)
    assert decoder.num_comments == (len(items) if heartbeat and heartbeat != HEARTBEAT else 0)
    assert decoder.pending == b""


def test_blank_line_heartbeats_before_and_between_events_are_counted_and_dispatch_nothing():
    # what the relay sends while the engine is silent: before the first token and between two tokens
    decoder = SSEDecoder()
    assert decoder.feed(HEARTBEAT) == [] and decoder.feed(HEARTBEAT) == []
    assert decoder.feed(b'data: {"a":1}\n\n') == [b'{"a":1}']
    assert decoder.feed(HEARTBEAT) == [] and decoder.pending == b""
    assert decoder.feed(b'data: {"b":2}\n\n' + HEARTBEAT + DONE_EVENT) == [b'{"b":2}', b"[DONE]"]
    assert decoder.num_heartbeats == decoder.num_blank_lines == 4 and decoder.num_comments == 0


def test_multibyte_character_split_inside_is_reassembled():
    stream = encode_data("秘密の数字は 7".encode())
    for cut in range(1, len(stream)):
        events, _ = feed_in_pieces(stream, [cut])
        assert events == ["秘密の数字は 7".encode()]


def test_multi_line_data_is_joined_with_newlines():
    decoder = SSEDecoder()
    assert decoder.feed(b'event: message\ndata: {"a":\ndata: 1}\nid: 3\n\n') == [b'{"a":\n1}']
    assert encode_data(b"x\ny") == b"data: x\ndata: y\n\n"


def test_data_without_space_and_comment_only_events():
    decoder = SSEDecoder()
    assert decoder.feed(b":\n\n: ping\n\ndata:{}\n\n") == [b"{}"]
    assert decoder.num_comments == 2


def test_truncated_event_stays_pending():
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"choices"') == []
    assert decoder.pending == b'data: {"choices"'


def reference_events(stream: bytes) -> tuple[list[bytes], int]:
    """The SSE spec's line-by-line reading (LF endings only), written apart from the decoder; and the
    heartbeats: comment lines, and blank lines that end no block (no line at all since the last one)."""
    events, data, heartbeats, in_block = [], [], 0, False
    for line in stream.split(b"\n")[:-1]:
        if not line:
            if data:
                events.append(b"\n".join(data))
            elif not in_block:
                heartbeats += 1
            data, in_block = [], False
            continue
        in_block = True
        if line.startswith(b":"):
            heartbeats += 1
        else:
            name, _, value = line.partition(b":")
            if name == b"data":
                data.append(value[1:] if value[:1] == b" " else value)
    return events, heartbeats


blocks = st.lists(
    st.one_of(
        payloads.map(lambda items: b"".join(encode_data(p) for p in items)),  # the common data-only events
        st.just(b": ping\n\n"),
        st.just(b"\n"),
        st.just(b"\n\n"),  # comments, stray blank lines
        st.just(b'event: message\ndata: {"a":\ndata: 1}\nid: 3\n\n'),
        st.just(b"data:{}\n\n"),
    ),
    max_size=8,
)


@settings(max_examples=300)
@given(blocks, st.lists(st.integers(min_value=0, max_value=10_000), max_size=20))
def test_fast_path_and_full_parser_agree_on_any_mix_of_blocks(parts, cuts):
    stream = b"".join(parts) + DONE_EVENT
    events, decoder = feed_in_pieces(stream, cuts)
    assert (events, decoder.num_heartbeats) == reference_events(stream)
