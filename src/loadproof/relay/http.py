"""HTTP/1.1 framing for the relay: request and response heads, chunked bodies, response heads to send.

The relay speaks HTTP/1.1 on asyncio protocols itself (relay.app says why: a framework's per-request and
per-chunk costs halved its throughput against nginx). What it accepts is deliberately narrow: a request
line and headers in CRLF lines, a body framed by Content-Length or by `Transfer-Encoding: chunked` (never
both: that is how requests get smuggled), HTTP/1.0 or 1.1. Anything else is a 400 (or 501/505) and the
connection is closed.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from email.utils import formatdate
from urllib.parse import urlsplit

MAX_HEAD_BYTES = 64 * 1024  # request line and headers together
_HEX = b"0123456789abcdefABCDEF"
REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Content Too Large",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    505: "HTTP Version Not Supported",
}


class BadMessage(Exception):
    """A request (or an upstream response) the relay will not parse: status and a short reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(slots=True)
class RequestHead:
    method: str
    path: str  # without the query string
    http11: bool
    headers: dict[str, str]  # lower-case names; repeated fields joined with ", "
    keep_alive: bool
    content_length: int | None
    chunked: bool
    expect_continue: bool


def parse_request_head(head: bytes) -> RequestHead:
    """The request line and headers (`head` without its final blank line)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        raise BadMessage(400, "malformed request line")
    method, target, version = parts
    if version == b"HTTP/1.1":
        http11 = True
    elif version == b"HTTP/1.0":
        http11 = False
    elif version.startswith(b"HTTP/"):
        raise BadMessage(505, "only HTTP/1.0 and HTTP/1.1 are served")
    else:
        raise BadMessage(400, "malformed request line")
    headers = _parse_fields(lines[1:])
    length = headers.get("content-length")
    content_length = None
    if length is not None:
        if not (length.isascii() and length.isdigit()):
            raise BadMessage(400, "malformed Content-Length")
        content_length = int(length)
    encoding = headers.get("transfer-encoding")
    chunked = False
    if encoding is not None:
        if content_length is not None or not http11:
            raise BadMessage(400, "Transfer-Encoding with Content-Length, or on HTTP/1.0")
        if encoding.lower() != "chunked":
            raise BadMessage(501, "only the chunked transfer coding is accepted")
        chunked = True
    # HTTP/1.0 connections are closed after each answer (no `connection: keep-alive` is ever sent back)
    keep_alive = http11 and "close" not in {t.strip() for t in headers.get("connection", "").lower().split(",")}
    path = target.decode("latin-1")
    if not path.startswith("/"):
        path = urlsplit(path).path or "/" if "://" in path else path
    path = path.split("?", 1)[0]
    expect = headers.get("expect", "").lower() == "100-continue" and http11
    return RequestHead(method.decode("ascii"), path, http11, headers, keep_alive, content_length, chunked, expect)


def parse_response_head(head: bytes) -> tuple[int, bool, dict[str, str]]:
    """(status, HTTP/1.1?, headers) of an upstream's response head."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not (parts[1].isdigit() and len(parts[1]) == 3):
        raise BadMessage(502, "malformed status line")
    return int(parts[1]), parts[0] == b"HTTP/1.1", _parse_fields(lines[1:])


def _parse_fields(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(b":")
        if not sep or not name or name.strip() != name or b" " in name or b"\t" in name:
            raise BadMessage(400, "malformed header field")
        key = name.lower().decode("latin-1")
        text = value.strip(b" \t").decode("latin-1")
        if key in headers:
            if key == "content-length":
                if headers[key] != text:
                    raise BadMessage(400, "conflicting Content-Length fields")
                continue
            text = headers[key] + ", " + text
        headers[key] = text
    return headers


_SIZE, _DATA, _DATA_END, _TRAILER = range(4)  # ChunkedDecoder's states


class ChunkedDecoder:
    """Incremental `Transfer-Encoding: chunked` decoding over arbitrary splits. `feed` returns the data
    decoded so far; once the last chunk and its trailers are read, `done` is set and `rest` holds what came
    after the body (the next message, on a kept-alive connection)."""

    __slots__ = ("_buf", "_need", "_state", "done", "rest")

    def __init__(self) -> None:
        self._buf = b""
        self._need = 0
        self._state = _SIZE
        self.done = False
        self.rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        buf = self._buf + data if self._buf else data
        pos, end = 0, len(buf)
        state, need = self._state, self._need
        while pos < end:
            if state == _DATA:
                stop = pos + need
                if stop > end:
                    out.append(buf[pos:] if pos else buf)
                    need -= end - pos
                    pos = end
                    break
                out.append(buf[pos:stop])
                pos, need = stop, 0
                if buf[pos : pos + 2] == b"\r\n":  # the usual case: the CRLF after the data is here too
                    pos += 2
                    state = _SIZE
                else:
                    state = _DATA_END
            elif state == _SIZE:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > 1024:
                        raise BadMessage(400, "chunk size line too long")
                    break
                size = buf[pos:eol].split(b";", 1)[0].strip(b" \t")
                if not size or size.strip(_HEX) or len(size) > 15:
                    raise BadMessage(400, "malformed chunk size")
                need = int(size, 16)
                pos = eol + 2
                state = _DATA if need else _TRAILER
            elif state == _DATA_END:
                if end - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise BadMessage(400, "chunk data not followed by CRLF")
                pos += 2
                state = _SIZE
            else:  # trailer fields, then the blank line that ends the body
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > MAX_HEAD_BYTES:
                        raise BadMessage(400, "trailer too long")
                    break
                if eol == pos:
                    self.done = True
                    self.rest = buf[pos + 2 :]
                    pos = end
                    break
                pos = eol + 2
        self._state, self._need = state, need
        self._buf = buf[pos:] if pos < end else b""
        return out


_date_cache: tuple[int, bytes] = (0, b"")


def http_date() -> bytes:
    """The Date header's value, formatted once a second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True).encode())
    return _date_cache[1]


def response_head(
    status: int,
    content_type: str | None,
    *,
    length: int | None = None,
    chunked: bool = False,
    close: bool = False,
    extra: bytes = b"",
) -> bytes:
    """A response's status line and headers, ending in the blank line."""
    head = b"HTTP/1.1 %d %s\r\ndate: %s\r\nserver: loadproof-relay\r\n" % (
        status,
        REASONS.get(status, "Unknown").encode(),
        http_date(),
    )
    if content_type:
        head += b"content-type: " + content_type.encode("latin-1") + b"\r\n"
    if length is not None:
        head += b"content-length: %d\r\n" % length
    elif chunked:
        head += b"transfer-encoding: chunked\r\n"
    if close:
        head += b"connection: close\r\n"
    return head + extra + b"\r\n"


def internal_error(exc: BaseException) -> None:
    """A bug, logged by its type and place only: an exception's message may hold a prompt or an address."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb is not None else "?"
    logging.getLogger("loadproof.relay").error(
        json.dumps({"event": "internal_error", "error": type(exc).__name__, "at": where})
    )
