"""Reading stored files defensively: regular files only, bounded sizes, JSON that cannot crash the reader.

Run directories and publication bundles are read through here. A bundle comes from a stranger, so
every way a file can hurt its reader ends in one `RunDirError` naming the file (and line):

- a symbolic link is never followed (`O_NOFOLLOW`), and anything but a regular file (a FIFO, a
  socket, a device) is refused before a byte is read (`O_NONBLOCK`, so opening a FIFO cannot block);
- a file larger than its cap, or a line longer than its cap, is refused (caps are the caller's;
  `None` means no cap, for run directories this machine wrote);
- JSON is UTF-8 only; an integer literal of more than `MAX_INT_DIGITS` digits, a number literal
  longer than `MAX_NUMBER_CHARS`, or nesting deeper than `MAX_JSON_DEPTH` is refused (Python's own
  limits would raise ValueError past 4,300 digits and RecursionError around depth 1,000);
- a compressed file (`NAME.zst`, zstandard: how a bundle stores a run's JSONL records) is read through
  `open_content`, whose decompression is bounded: its frame header must declare the content's size,
  which must be within the caller's cap (`MAX_DECOMPRESSED_BYTES` when the caller sets none); content
  past the declared size, short of it (a truncated file), or that does not decode is refused as soon
  as it shows, after at most one read's worth; the decoder's window is capped at `MAX_WINDOW_BYTES`.
  A zstd bomb is one RunDirError naming the file, never more memory than the caps allow.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import zstandard  # a bundle's records are stored compressed (requests.jsonl.zst): its reader must read them

from loadproof.errors import RunDirError

MAX_JSON_DEPTH = 64  # our own files nest 6 deep at most
MAX_INT_DIGITS = 40  # nanosecond times have 19 digits
MAX_NUMBER_CHARS = 100  # json.dumps and msgspec write at most 24 characters per float
_LONG_DIGITS = re.compile(rb"\d{%d}" % (MAX_INT_DIGITS + 1))
ZST = ".zst"  # a compressed file's suffix: NAME.zst holds NAME's content
# docs/runs' 40.6 MB of records: 6.70 MB at 19 (0.46 s of CPU a MB), 6.85 at 16 (0.19 s), about 10 at 3
COMPRESSION_LEVEL = 19
MAX_DECOMPRESSED_BYTES = 256 * 1024**2  # a .zst file's content when the caller sets no cap (a bundle's file cap)
MAX_WINDOW_BYTES = 1 << 25  # the decoder's memory; level 19 writes windows of 8 MiB at most
_READ_BYTES = 1 << 17
_FRAME_HEADER_BYTES = 18  # the longest zstd frame header
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


def content_path(path: Path) -> Path:
    """The stored file that holds `path`'s content: `path` itself, or `path.zst` (compressed).
    FileNotFoundError when neither exists; RunDirError when both do (which of them would be the data?)."""
    packed = path.with_name(path.name + ZST)
    found = [p for p in (path, packed) if os.path.lexists(p)]
    if len(found) == 2:
        raise RunDirError(f"{path.parent} holds both {path.name} and {packed.name}; one of them must go")
    if found:
        return found[0]
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))


def declared_size(path: Path, header: bytes) -> int:
    """The content size a `.zst` file's frame header (its first bytes) declares; RunDirError when it is no
    zstd frame or declares none (loadproof writes it; a stream compressed from a pipe lacks it)."""
    try:
        size = zstandard.frame_content_size(header)
    except zstandard.ZstdError:
        raise RunDirError(f"{path} is not a zstd file (no zstd frame header)") from None
    if size < 0:
        raise RunDirError(f"{path}: its zstd frame header does not declare the content's size")
    return int(size)


def content_size(path: Path, max_bytes: int | None = None) -> int:
    """The content size a `.zst` file declares, reading its header only (a regular file of at most
    `max_bytes`, as `open_regular`)."""
    with os.fdopen(open_regular(path, max_bytes), "rb") as handle:
        return declared_size(path, handle.read(_FRAME_HEADER_BYTES))


@contextmanager
def open_content(path: Path, max_bytes: int | None = None) -> Iterator[IO[bytes]]:
    """A binary stream of a stored file's content: the regular file itself, or for a `.zst` name its
    content decompressed, bounded (the module's docstring): at most `max_bytes` stored and at most
    `max_bytes` (or `MAX_DECOMPRESSED_BYTES`) of content."""
    with os.fdopen(open_regular(path, max_bytes), "rb") as handle:
        if not path.name.endswith(ZST):
            yield handle
            return
        size = declared_size(path, handle.read(_FRAME_HEADER_BYTES))
        cap = MAX_DECOMPRESSED_BYTES if max_bytes is None else max_bytes
        if size > cap:
            raise RunDirError(f"{path} decompresses to {size:,} bytes, over the {cap:,}-byte cap")
        handle.seek(0)
        with io.BufferedReader(_Decompressed(path, handle, size), _READ_BYTES) as content:
            yield content


class _Decompressed(io.RawIOBase):
    """A `.zst` file's content, which must be exactly the size its frame header declares."""

    def __init__(self, path: Path, source: IO[bytes], size: int) -> None:
        self._path, self._size, self._done = path, size, 0
        decoder = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES)
        self._reader = decoder.stream_reader(source, read_size=_READ_BYTES, read_across_frames=True, closefd=False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._size - self._done
        try:  # one byte past the declared size is enough to tell that there is more
            data = self._reader.read(min(len(buffer), left + 1))
        except zstandard.ZstdError as exc:
            raise RunDirError(f"{self._path} does not decompress ({exc})") from None
        if len(data) > left:
            raise RunDirError(f"{self._path} decompresses to more than the {self._size:,} bytes its header declares")
        if not data and left:
            raise RunDirError(f"{self._path} is truncated: {self._done:,} of the {self._size:,} bytes it declares")
        self._done += len(data)
        buffer[: len(data)] = data
        return len(data)


def read_content(path: Path, max_bytes: int | None = None) -> bytes:
    """The whole content of a stored file (decompressed for a `.zst` name), bounded as `open_content`."""
    with open_content(path, max_bytes) as handle:
        return handle.read()


def compressed(data: bytes) -> bytes:
    """`data` as one zstd frame that declares its size (what `open_content` requires), at COMPRESSION_LEVEL."""
    return zstandard.ZstdCompressor(level=COMPRESSION_LEVEL, write_content_size=True).compress(data)


def iter_lines(
    path: Path, max_file_bytes: int | None = None, max_line_bytes: int | None = None
) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, complete) of each line of a stored file's content (`open_content`: a `.zst`
    name is decompressed); `complete` is False only for a last line with no newline (where an
    interrupted append stops)."""
    with open_content(path, max_file_bytes) as handle:
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
