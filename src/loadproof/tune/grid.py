"""`loadproof tune`'s grid: `--grid KEY=V1,V2,...` over a deployment profile's settings, each point a
profile of its own (validated as any profile is), written as TOML so `loadproof serve` runs it.

A KEY is a dotted path into the profile (`scheduler.max_num_seqs`, `kv_cache.budget_gib_per_gpu`,
`speculative.num_speculative_tokens`); a bare scheduler field (`max_num_seqs`) means `scheduler.` it. Values
are read as TOML scalars (8, 0.5, true, "text"). The points are every combination, in the order given.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from dataclasses import dataclass
from typing import Any

from loadproof.config.profile import Profile, parse_profile
from loadproof.errors import UsageError

SCHEDULER_KEYS = ("max_num_seqs", "max_num_batched_tokens")


@dataclass(frozen=True)
class Axis:
    key: str  # dotted path
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Point:
    name: str  # `max_num_seqs=8,max_num_batched_tokens=512`, also its folder's name
    settings: dict[str, Any]
    profile: Profile


def parse_axis(text: str) -> Axis:
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise UsageError(f"--grid {text!r}: give KEY=V1,V2,... (e.g. max_num_seqs=4,8,16)")
    if key in SCHEDULER_KEYS:
        key = f"scheduler.{key}"
    parsed = []
    for raw in values.split(","):
        try:
            parsed.append(tomllib.loads(f"v = {raw.strip()}")["v"])
        except tomllib.TOMLDecodeError:
            parsed.append(raw.strip())  # a bare word: a string
    if len(set(map(repr, parsed))) != len(parsed):
        raise UsageError(f"--grid {text!r}: a value is given twice")
    return Axis(key, tuple(parsed))


def points(base: Profile, axes: list[Axis]) -> list[Point]:
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        raise UsageError("--grid: a key is given twice")
    out = []
    for combo in itertools.product(*(a.values for a in axes)):
        settings = dict(zip(keys, combo))
        name = ",".join(f"{k.removeprefix('scheduler.')}={v}" for k, v in settings.items())
        data = base.model_dump(exclude_none=True)
        for key, value in settings.items():
            _set(data, key, value)
        out.append(Point(name, settings, parse_profile(data, f"--grid point {name}")))
    return out


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    *path, last = key.split(".")
    node = data
    for part in path:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise UsageError(f"--grid {key}: {part} is not a table of the profile")
    node[last] = value


def profile_toml(profile: Profile) -> str:
    """TOML text of a profile: its top-level values, then one table per section (dotted for nested ones),
    a table inside a section's value (serving.env) inline."""
    return _tables(profile.model_dump(exclude_none=True), "")


def _tables(data: dict[str, Any], prefix: str) -> str:
    lines, nested = [], []
    for key, value in data.items():
        if isinstance(value, dict) and (not prefix or any(isinstance(v, dict) for v in value.values())):
            nested.append((key, value))
        else:
            lines.append(f"{json.dumps(key)} = {_value(value)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in nested:
        name = f"{prefix}{key}"
        text += f"\n[{name}]\n" + _tables(value, f"{name}.")
    return text


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(str(value))
