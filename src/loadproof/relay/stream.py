"""What the relay must know of a stream it passes through byte for byte, without parsing its events.

Where the last write ended (a heartbeat or an error event may go in only on an event boundary: a blank
line mid-event would end the event), whether the engine sent an in-band error event, and whether the
stream's last event, `data: [DONE]`, has gone to the client. A marker split across two reads is caught
through the tail of the previous read.
"""

from __future__ import annotations

# an in-band error event as vLLM (`{"error": {...}}`), SGLang and older vLLM (`"object": "error"`) send it
_ERROR_MARKERS = (b'data: {"error"', b'data:{"error"', b'"object": "error"', b'"object":"error"')


class StreamWatch:
    __slots__ = ("at_boundary", "got_body", "error_event", "done_sent", "_tail")

    def __init__(self) -> None:
        self.at_boundary = True
        self.got_body = False
        self.error_event = False
        self.done_sent = False  # the stream's last event, `data: [DONE]`, has gone to the client
        self._tail = b""

    def feed(self, data: bytes) -> None:
        """One read of the upstream's body, about to be written to the client."""
        if self._tail and any(m in self._tail + data[:24] for m in _ERROR_MARKERS):
            self.error_event = True
        if b'"error"' in data and any(m in data for m in _ERROR_MARKERS):
            self.error_event = True
        self.got_body = True
        end = data[-4:]
        self.at_boundary = boundary = end[-2:] == b"\n\n" or end == b"\r\n\r\n" or end[-2:] == b"\r\r"
        self.done_sent = boundary and (self._tail + data[-24:]).rstrip(b"\r\n").endswith(b"data: [DONE]")
        self._tail = b"" if boundary else data[-24:]
