"""`loadproof history CLAIM`: one claim over the stored runs, oldest first, with its interval where it has one.

`history(store, claim, where, since)` finds the runs; `rows` is the table the console prints (time, run, value
[low, high], profile, engine version); `results.trend` draws the page. A run's time is its start, an imported
run's the start its tool's file states; an imported run whose file states none is dated by its import, its time
marked `*` and said under the table (`IMPORT_NOTE`). A claim no stored run has, or a query that
matches none of those that do, is one line (exit 2), with the nearest names or what the claim's runs hold.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from loadproof.errors import UsageError
from loadproof.report.change import figure_text
from loadproof.results.model import StoredClaim, StoredRun, check_where
from loadproof.results.store import Store
from loadproof.verify.display import shown

HEADER = ["time (UTC)", "run", "value [low, high]", "profile", "engine version"]
TIME = "%Y-%m-%d %H:%M"
CONSOLE_TIME = "%Y-%m-%dT%H:%M"  # no space: a table cell that does not wrap
IMPORT_MARK = "*"
IMPORT_NOTE = (
    "* an imported run whose file states no date (inference-perf's), dated by when it was imported (docs/import.md)"
)
_AGO = re.compile(r"(\d{1,5})([dhw])")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


@dataclass(frozen=True)
class Point:
    run: StoredRun
    claim: StoredClaim

    @property
    def value_text(self) -> str:
        """`0.512 s [0.498, 0.530]`: the printed figure, its unit, its interval at the same precision."""
        claim = self.claim
        text = claim.printed + (f" {claim.unit}" if claim.unit else "")
        if claim.low is not None and claim.high is not None:
            text += f" [{figure_text(claim.low, claim.printed)}, {figure_text(claim.high, claim.printed)}]"
        return text


@dataclass
class History:
    claim: str
    points: list[Point]  # oldest first
    where: dict[str, str] = field(default_factory=dict)
    since: datetime | None = None
    store: str = ""

    @property
    def numeric(self) -> list[Point]:
        return [p for p in self.points if p.claim.is_number]

    @property
    def conditions(self) -> str:
        """`profile=a, model=b, since 2026-12-01 00:00`, or `every stored run`."""
        parts = [f"{k}={v}" for k, v in self.where.items()]
        if self.since is not None:
            parts.append(f"since {self.since.astimezone(UTC).strftime(TIME)} UTC")
        return ", ".join(parts) or "every stored run"


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """`2026-12-01`, `2026-12-01T10:00` (UTC unless it says its zone) or an age: `7d`, `12h`, `2w`."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    ago = _AGO.fullmatch(text)
    if ago:
        return (now or datetime.now(UTC)) - int(ago.group(1)) * _UNITS[ago.group(2)]
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--since {shown(text, 40)}: a date (2026-12-01), a time (2026-12-01T10:00, UTC) or an age (7d, 12h)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def history(store: Store, claim: str, where: dict[str, str] | None = None, since: datetime | None = None) -> History:
    """The runs holding `claim` that match `where` and `since`, oldest first."""
    where = dict(where or {})
    check_where(where)
    runs = store.query(where, since, claim=claim)
    if not runs:
        names = store.claim_names()
        if claim not in names:
            near = difflib.get_close_matches(claim, names, n=3, cutoff=0.6)
            hint = f"; the nearest: {', '.join(near)}" if near else f" ({len(names)} claim names are stored)"
            raise UsageError(f"no run in the results store {store.shown} has the claim {shown(claim, 120)}{hint}")
        held = len(store.query(claim=claim))
        found = History(claim, [], where, since, store.shown)
        raise UsageError(
            f"no stored run with {shown(claim, 120)} matches {found.conditions} ({held} stored run(s) have the claim)"
        )
    points = [Point(run, run.claims[claim]) for run in reversed(runs)]
    return History(claim, points, where, since, store.shown)


def rows(found: History) -> list[list[str]]:
    """The console's table, oldest first."""
    return [
        [
            p.run.started_at.astimezone(UTC).strftime(CONSOLE_TIME) + (IMPORT_MARK if p.run.dated_by_import else ""),
            p.run.run_id,
            p.value_text,
            p.run.profile or "",
            p.run.engine_version or "",
        ]
        for p in found.points
    ]


def notes(found: History) -> list[str]:
    """What the table's marks mean, for those it has."""
    return [IMPORT_NOTE] if any(p.run.dated_by_import for p in found.points) else []
