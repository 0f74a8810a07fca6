"""What the relay must know of a stream it passes through byte for byte, without parsing its events.

Where the last write ended (a heartbeat or an error event may go in only on an event boundary: a blank
line mid-event would end the event), whether the engine sent an in-band error event, and whether the
stream's last event has gone to the client: `data: [DONE]` (completions, chat), or, for an API whose
stream ends with an event of its own (Responses: `response.completed`; Messages: `message_stop`), an event
of a name its route adapter lists (`Route.end_events`), read from the event's `event:` line. A marker
split across two reads is caught through the tail of the previous read. A JSON payload holds no raw line
break, so a line that starts `event:` is always an event's field, never text inside a `data:` line.
"""

from __future__ import annotations

# an in-band error event as vLLM (`{"error": {...}}`), SGLang and older vLLM (`"object": "error"`) send it, and
# as an API of named events does (`event: error`: the Responses and Messages APIs, vLLM's included)
_ERROR_MARKERS = (
    b'data: {"error"',
    b'data:{"error"',
    b'"object": "error"',
    b'"object":"error"',
    b"\nevent: error\n",
    b"\nevent: error\r",
    b"\nevent:error\n",
    b"\nevent:error\r",
)
_EVENT = b"\nevent:"
_TAIL = 64  # bytes of the previous read kept: longer than any marker, and than an `event:` line of a known name


class StreamWatch:
    __slots__ = ("at_boundary", "got_body", "error_event", "done_sent", "_tail", "_ends", "_last_event")

    def __init__(self, end_events: frozenset[bytes] = frozenset()) -> None:
        """`end_events`: the `event:` names that end this stream (none: `data: [DONE]` does)."""
        self.at_boundary = True
        self.got_body = False
        self.error_event = False
        self.done_sent = False  # the stream's last event has gone to the client
        self._tail = b"\n"  # the stream's start is a line's start
        self._ends = end_events
        self._last_event = b""  # the name on the last complete `event:` line (end_events only)

    def feed(self, data: bytes) -> None:
        """One read of the upstream's body, about to be written to the client."""
        tail = self._tail
        if b"error" in tail + data[:24] and any(m in tail + data[:24] for m in _ERROR_MARKERS):
            self.error_event = True
        if b"error" in data and any(m in data for m in _ERROR_MARKERS):
            self.error_event = True
        self.got_body = True
        end = (tail + data[-4:])[-4:]  # a read of one line end finishes the previous read's line
        self.at_boundary = boundary = end[-2:] == b"\n\n" or end == b"\r\n\r\n" or end[-2:] == b"\r\r"
        if self._ends:
            # the last complete `event:` line: in this read, or else one begun in the previous read's tail
            self._read_event_name(data) or self._read_event_name(tail + data[:_TAIL])
            self.done_sent = boundary and self._last_event in self._ends
        else:
            self.done_sent = boundary and (tail + data[-24:]).rstrip(b"\r\n").endswith(b"data: [DONE]")
        self._tail = (tail + data)[-_TAIL:] if len(data) < _TAIL else data[-_TAIL:]

    def _read_event_name(self, buf: bytes) -> bool:
        """Keep the name on the last complete `event:` line in `buf`, if any (an unfinished one is read with the
        next read)."""
        at = buf.rfind(_EVENT)
        while at >= 0:
            eol = buf.find(b"\n", at + 1)
            if eol >= 0:
                self._last_event = buf[at + len(_EVENT) : eol].strip(b" \t\r")
                return True
            at = buf.rfind(_EVENT, 0, at)
        return False
