"""One row of a user's data file, read strictly: what the data-set and trace readers share.

A file is opened with `errors="surrogateescape"` (`open_text`), so a byte that is not valid UTF-8 reaches
the reader as a lone surrogate instead of a silent U+FFFD: `utf8_problem` finds it, and the row is
malformed, an error naming the file and line (or skipped and counted with `--skip-bad-rows`), never a
prompt with a replacement character in it. A strict UTF-8 decode never yields a lone surrogate, so one
found in the text is always a bad byte of the file.

`parse_json` reads one JSON text: a row that is not JSON, or nested deeper than Python's recursion
limit lets `json` read (about 1,000 levels; a row nested 100,000 deep once ended a run with a
RecursionError traceback), is a problem of that row. Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

TOO_DEEP = "nested too deep to read (JSON nested more than about 1,000 levels)"


def open_text(path: Path, newline: str | None = None) -> IO[str]:
    """`path` for reading as UTF-8 text, every invalid byte kept as a lone surrogate for `utf8_problem`."""
    return open(path, encoding="utf-8", errors="surrogateescape", newline=newline)


def utf8_problem(text: str) -> str | None:
    """None when `text` (read through `open_text`) was valid UTF-8 in the file; else which byte is not."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        offset = len(text[: exc.start].encode("utf-8", "surrogateescape"))
        byte = text[exc.start].encode("utf-8", "surrogateescape")
        return f"not valid UTF-8 (byte 0x{byte.hex() if len(byte) == 1 else '??'} at byte {offset + 1} of the row)"
    return None


def parse_json(text: str) -> tuple[Any, str | None]:
    """(the value, None), or (None, the problem): not valid UTF-8, not JSON, or nested too deep to read."""
    problem = utf8_problem(text)
    if problem is not None:
        return None, problem
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return None, TOO_DEEP
