"""Reading another tool's file defensively: a size cap, JSON or JSON lines parsed whole, and every refusal one
line naming the file (`Refused`, a UsageError: exit code 2, nothing written)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError

MAX_FILE_BYTES = 512 * 1024**2  # a result file of a few hundred thousand requests; more is not a result file


class Refused(UsageError):
    """The file is not one `loadproof import` reads: another tool's, another version's shape, or damaged."""


def read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise Refused(f"{path}: no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise Refused(f"{path}: {path.stat().st_size:,} bytes, more than a result file ({MAX_FILE_BYTES:,})")
    return path.read_bytes()


def sha256_of(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def parse_json(raw: bytes, name: str) -> Any:
    """The JSON document `raw`; a truncated or damaged one is one line saying where it stops making sense."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"{name}: not UTF-8 text (byte {exc.start}): not a result file") from None
    if not text.strip():
        raise Refused(f"{name}: empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = "ends early" if exc.pos >= len(text.rstrip()) else f"breaks at byte {exc.pos:,} of {len(raw):,}"
        raise Refused(f"{name}: not complete JSON, it {where} ({exc.msg}): a truncated or damaged file") from None


def parse_json_lines(raw: bytes, name: str) -> list[Any]:
    """Each line of a JSON-lines file; a damaged line (the last one cut short too) is one line naming it."""
    rows = []
    for number_, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise Refused(
                f"{name}: line {number_} is not complete JSON ({exc.msg}): a truncated or damaged file"
            ) from None
    return rows


def shape_error(name: str, tool: str, version: str, missing: list[str]) -> Refused:
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    return Refused(f"{name}: looks like {tool} output but not its {version} (missing {shown}): another version's shape")


def number(data: dict[str, Any], key: str, name: str) -> float:
    """`data[key]` as a finite number, else one line naming the key."""
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Refused(f"{name}: {key} = {value!r}, not a number")
    return float(value)


def get(data: Any, path: str, name: str) -> Any:
    """`data` at a dotted `path` ("metadata.version"), else one line naming the path."""
    here = data
    for part in path.split("."):
        if not isinstance(here, dict) or part not in here:
            raise Refused(f"{name}: no {path}")
        here = here[part]
    return here
