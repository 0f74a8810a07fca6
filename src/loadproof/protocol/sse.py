"""The one server-sent-events codec of loadproof, used by the client, the relay and the simulator.

Decoding is incremental over arbitrary byte splits. Events are cut only at blank lines, which are
ASCII, so a multi-byte UTF-8 character split across reads is reassembled before anyone decodes it.
Heartbeats are counted, not returned: `:` comment lines, and blank lines outside any event (what the
relay sends: `HEARTBEAT`). `data: [DONE]` is returned as the payload `b"[DONE]"`; the caller decides
what it means. Line endings may be LF, CRLF or CR (the SSE spec allows all three); the fast path
handles the LF-only framing every OpenAI-compatible server sends.
"""

from __future__ import annotations

DONE = b"[DONE]"
DONE_EVENT = b"data: [DONE]\n\n"
# The relay's keep-alive: one blank line, sent only between events. Valid SSE that dispatches nothing, and
# invisible to every client measured (docs/relay-and-supervisor.md); a `:` comment is valid SSE too, but
# `vllm bench serve` strips each network read before splitting events, so a comment arriving alone loses
# its terminator and every later event of the stream with it.
HEARTBEAT = b"\n"


class SSEDecoder:
    """Feed bytes as they arrive; get back the data payload of every event completed so far."""

    __slots__ = ("_buf", "_skip_lf", "num_comments", "num_blank_lines")

    def __init__(self) -> None:
        self._buf = b""
        self._skip_lf = False
        self.num_comments = 0
        self.num_blank_lines = 0  # blank lines outside any event: keep-alives that dispatch nothing

    def feed(self, data: bytes) -> list[bytes]:
        if self._skip_lf:
            # the previous read ended in CR, already taken as a line end: its LF is not another one
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            self._skip_lf = data.endswith(b"\r")
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + data if self._buf else data
        if buf[:1] == b"\n":  # the buffer starts where an event may start: these are blank lines
            rest = buf.lstrip(b"\n")
            self.num_blank_lines += len(buf) - len(rest)
            buf = rest
        end = buf.rfind(b"\n\n")
        if end < 0:
            self._buf = buf
            return []
        # Fast path, in C: every complete event is one `data: ` line, as OpenAI-compatible servers send.
        # Split on the blank line + `data: ` between events; if that accounts for every LF (two per
        # separator), no event holds another line (a comment, a field, multi-line data), and the parts are
        # the payloads. Otherwise the loop below parses every block.
        if buf[:6] == b"data: ":
            parts = buf[6:end].split(b"\n\ndata: ")
            if buf.count(b"\n", 0, end) == 2 * (len(parts) - 1):
                self._buf = buf[end + 2 :]
                return parts
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()
        out: list[bytes] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:
                out.append(block[6:])
            elif not block:  # two blank lines between two events
                self.num_blank_lines += 2
            else:
                if block[:1] == b"\n":
                    rest = block.lstrip(b"\n")
                    self.num_blank_lines += len(block) - len(rest)
                    block = rest
                    if not block:
                        continue
                payload = self._parse_block(block)
                if payload is not None:
                    out.append(payload)
        return out

    def _parse_block(self, block: bytes) -> bytes | None:
        data_lines: list[bytes] = []
        for line in block.split(b"\n"):
            if not line:
                continue
            if line[:1] == b":":
                self.num_comments += 1
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                data_lines.append(value)
            # `event:`, `id:` and `retry:` carry nothing an OpenAI-compatible stream needs
        if not data_lines:
            return None
        return b"\n".join(data_lines)

    @property
    def num_heartbeats(self) -> int:
        """Keep-alives seen: comment lines and blank lines outside any event."""
        return self.num_comments + self.num_blank_lines

    @property
    def pending(self) -> bytes:
        """Bytes received after the last complete event (non-empty means a truncated stream)."""
        return self._buf


def encode_data(payload: bytes) -> bytes:
    """One event carrying `payload`; a payload with newlines becomes several `data:` lines."""
    if b"\n" in payload or b"\r" in payload:
        lines = payload.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return b"data: " + payload + b"\n\n"


def encode_event(name: str, payload: bytes) -> bytes:
    """One event with its `event:` line (the Responses and Messages APIs name each of theirs); `payload` is
    one line of JSON."""
    return b"event: " + name.encode() + b"\n" + encode_data(payload)


def encode_comment(text: str = "") -> bytes:
    """A comment event: ignored by spec-following SSE clients (not by every client: see HEARTBEAT)."""
    body = text.replace("\r", " ").replace("\n", " ")
    return b": " + body.encode() + b"\n\n" if body else b":\n\n"
