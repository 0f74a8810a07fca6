"""A stored run as the results store gives it back: the manifest fields users query by, every claim with its
interval, the environment, the digest of its records and where the run lies (docs/results.md, "What is stored").

`StoredRun` is both what `store add` writes (read from a run directory, `results.entry`) and what
`Store.query` returns; `store_id` and `added_at` are set once it is in a store. `WHERE_KEYS` are the fields a
query may name (`--where profile=...,model=...`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from loadproof.errors import UsageError
from loadproof.rundir.source import DATED_BY_IMPORT

# the fields `--where` and `Store.query(where=...)` take, each a column of the runs table
WHERE_KEYS = ("scenario", "profile", "model", "engine", "engine_version", "endpoint", "target", "run_id", "source")


@dataclass(frozen=True)
class StoredClaim:
    """One claim of claims.json: its value (a number, a text or a yes/no), unit, printed figure, meaning, and a
    measured figure's interval (low, high, confidence, method; all None where claims.json gives none)."""

    name: str
    value: float | int | str | bool
    unit: str = ""
    printed: str = ""
    kind: str = "figure"
    direction: str = "neither"
    low: float | None = None
    high: float | None = None
    confidence: float | None = None
    method: str | None = None

    @property
    def is_number(self) -> bool:
        return isinstance(self.value, (int, float)) and not isinstance(self.value, bool)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


@dataclass(frozen=True)
class StoredRun:
    """A run in the store. `started_at` is the run's start (UTC; its end, or the time it was added, where the
    manifest has no start: an imported run whose file states no date, `dated_by_import`); `target` is the server's
    address with every private part replaced (`results.entry`); `path` the run directory as it was added;
    `source` `run` (a run directory) or `bundle` (a published one)."""

    run_id: str
    digest: str
    started_at: datetime
    scenario: str | None = None
    profile: str | None = None
    model: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    endpoint: str | None = None
    target: str | None = None
    plan_version: int | None = None
    num_records: int | None = None
    ended_at: datetime | None = None
    path: str = ""
    source: str = "run"
    environment: dict[str, Any] = field(default_factory=dict)
    claims: dict[str, StoredClaim] = field(default_factory=dict)
    store_id: int | None = None  # the store's own key, once stored
    added_at: datetime | None = None  # when it was stored

    @property
    def dated_by_import(self) -> bool:
        """An imported run whose file states no date: `started_at` is when it was imported (`results.entry`)."""
        imported = self.environment.get("imported")
        return isinstance(imported, dict) and imported.get("dated") == DATED_BY_IMPORT

    def field_value(self, key: str) -> str | None:
        """The value of one of `WHERE_KEYS` as text."""
        value = getattr(self, key)
        return None if value is None else str(value)


def parse_where(text: str | None) -> dict[str, str]:
    """`profile=a,model=b` as {profile: a, model: b}; a key not in WHERE_KEYS, or a part without `=`, is one line."""
    where: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise UsageError(f"--where {text}: each condition is KEY=VALUE ({', '.join(WHERE_KEYS)})")
        check_where({key: value.strip()})
        where[key] = value.strip()
    return where


def check_where(where: dict[str, str]) -> None:
    unknown = [k for k in where if k not in WHERE_KEYS]
    if unknown:
        raise UsageError(f"--where {unknown[0]}: not a stored field; one of {', '.join(WHERE_KEYS)}")
