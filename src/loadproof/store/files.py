"""Reading stored files defensively: regular files only, bounded sizes, JSON that cannot crash the reader.

Run directories and publication bundles are read through here. A bundle comes from a stranger, so
every way a file can hurt its reader ends in one `RunDirError` naming the file (and line):

- a symbolic link is never followed (`O_NOFOLLOW`), and anything but a regular file (a FIFO, a
  socket, a device) is refused before a byte is read (`O_NONBLOCK`, so opening a FIFO cannot block);
- a file larger than its cap, or a line longer than its cap, is refused (caps are the caller's;
  `None` means no cap, for run directories this machine wrote);
- JSON is UTF-8 only; an integer literal of more than `MAX_INT_DIGITS` digits, a number literal
  longer than `MAX_NUMBER_CHARS`, or nesting deeper than `MAX_JSON_DEPTH` is refused (Python's own
  limits would raise ValueError past 4,300 digits and RecursionError around depth 1,000).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loadproof.errors import RunDirError

MAX_JSON_DEPTH = 64  # our own files nest 6 deep at most
MAX_INT_DIGITS = 40  # nanosecond times have 19 digits
MAX_NUMBER_CHARS = 100  # json.dumps and msgspec write at most 24 characters per float
_LONG_DIGITS = re.compile(rb"\d{%d}" % (MAX_INT_DIGITS + 1))
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class JSONRefused(ValueError):
    """A JSON text that is malformed or past one of the limits above."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path, max_bytes: int | None = None) -> int:
    """A read-only descriptor of `path`, which must be a regular file (not followed if a link) of at
    most `max_bytes`. FileNotFoundError when it does not exist; RunDirError for anything else wrong."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunDirError(f"{path} is a symbolic link; only regular files are read") from None
        if isinstance(exc, FileNotFoundError):
            raise
        raise RunDirError(f"{path} cannot be opened: {exc.strerror or exc}") from None
    except ValueError as exc:  # an embedded NUL byte
        raise RunDirError(f"{path!r} is not a usable file name ({exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RunDirError(f"{path} is {kind_of(info.st_mode)}; only regular files are read")
        if max_bytes is not None and info.st_size > max_bytes:
            raise RunDirError(f"{path} is {info.st_size:,} bytes, over the {max_bytes:,}-byte cap")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file of at most `max_bytes` (checked again while reading: it may grow)."""
    with os.fdopen(open_regular(path, max_bytes), "rb") as handle:
        data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise RunDirError(f"{path} grew past the {max_bytes:,}-byte cap while being read")
    return data


def iter_lines(
    path: Path, max_file_bytes: int | None = None, max_line_bytes: int | None = None
) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, complete) of each line of a regular file; `complete` is False only for a
    last line with no newline (where an interrupted append stops)."""
    with os.fdopen(open_regular(path, max_file_bytes), "rb") as handle:
        total = 0
        limit = -1 if max_line_bytes is None else max_line_bytes + 1  # the line and its newline
        for number, raw in enumerate(iter(lambda: handle.readline(limit), b""), 1):
            total += len(raw)
            if max_file_bytes is not None and total > max_file_bytes:
                raise RunDirError(f"{path} grew past the {max_file_bytes:,}-byte cap while being read")
            complete = raw.endswith(b"\n")
            body = raw[:-1] if complete else raw
            if max_line_bytes is not None and len(body) > max_line_bytes:
                raise RunDirError(f"{path}: line {number} is longer than the {max_line_bytes:,}-byte line cap")
            yield number, body, complete


def parse_json(data: bytes | str) -> Any:
    """One JSON value, within the limits above; JSONRefused (a ValueError) says why not."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONRefused(f"not UTF-8 at byte {exc.start}") from None
        raw = data
    else:
        text, raw = data, data.encode("utf-8", "surrogatepass")
    long_digits = _LONG_DIGITS.search(raw) is not None
    try:
        if long_digits:  # only then pay for a Python call per number
            value = json.loads(text, parse_int=_bounded_int, parse_float=_bounded_float)
        else:
            value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONRefused(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    except RecursionError:
        raise JSONRefused(f"nested deeper than {MAX_JSON_DEPTH}") from None
    except JSONRefused:
        raise
    except ValueError as exc:  # int() past Python's 4,300-digit limit, should a literal slip through
        raise JSONRefused(f"not usable JSON ({exc})") from None
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and _depth(value) > MAX_JSON_DEPTH:
        raise JSONRefused(f"nested deeper than {MAX_JSON_DEPTH}")
    return value


def _bounded_int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONRefused(f"an integer of {len(literal.lstrip('-')):,} digits (cap {MAX_INT_DIGITS})")
    return int(literal)


def _bounded_float(literal: str) -> float:
    if len(literal) > MAX_NUMBER_CHARS:
        raise JSONRefused(f"a number literal of {len(literal):,} characters (cap {MAX_NUMBER_CHARS})")
    return float(literal)


def _depth(value: Any) -> int:
    """How deep lists and objects nest in `value`, without recursion; stops counting past the cap."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                return depth
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json_file(path: Path, max_bytes: int | None = None) -> Any:
    """The JSON value of a whole file; RunDirError naming the file when it cannot be used."""
    try:
        return parse_json(read_regular(path, max_bytes))
    except JSONRefused as exc:
        raise RunDirError(f"{path}: {exc}") from None
