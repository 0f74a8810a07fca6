"""What a run's failed requests say: how many failed, and the most frequent error in its own words.

A failed request keeps its error on its record (`error_kind`, `error_message`: `HTTP 400: ...` with the
engine's own text, `no complete answer within 60 s`, ...). Failures are grouped by kind, HTTP status and
message with its digits masked (so `you requested 40123 tokens` and `... 40456 tokens` count as one),
and the most frequent group is shown by the text of its first request. Streams a scenario cancelled
itself when its window ended (capacity, interference: at or after its `cancel` event) did not fail.

A run measured nothing when it recorded no request, or when every request it recorded failed: no figure it
prints measures the engine, and the report and the console say so first (`Failures.headline`).

Where the most frequent error is one a profile fixes, the cause names that fix after the engine's words
(`HINTS`): vLLM refusing tool calls without a tool-call parser (HTTP 400 `... requires --tool-call-parser`,
`"auto" tool choice requires --enable-auto-tool-choice ...`) is answered by the packaged `embedded-tools`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run

SHOWN_CHARS = 300  # an error's text, at most (the client keeps an engine's message to 300 already)
_DIGITS = re.compile(r"\d+")
# an engine's refusal that serving it otherwise fixes: what its text says, and the fix
HINTS = (
    (
        re.compile(r"--tool-call-parser|--enable-auto-tool-choice"),
        "hint: the engine was served without a tool-call parser (vLLM: --tool-call-parser, and "
        "--enable-auto-tool-choice for tool_choice auto); the embedded model with one: loadproof serve embedded-tools",
    ),
)


def hint_for(error: str) -> str | None:
    """The fix for an error a profile fixes (`HINTS`), None for any other."""
    return next((hint for pattern, hint in HINTS if pattern.search(error)), None)


@dataclass(frozen=True)
class Failures:
    recorded: int
    failed: int  # failed, timed out or cancelled by anything but the scenario's own window
    planned: int  # cancelled after the window, as planned
    most_frequent: str | None = None  # the most frequent error's own text (one line)
    most_frequent_count: int = 0

    @property
    def measured_nothing(self) -> bool:
        return self.recorded == 0 or self.failed == self.recorded

    def counts(self) -> str:
        """`4 requests recorded, 0 failed (4 cancelled after the window, as planned)`."""
        line = f"{self.recorded} request{'' if self.recorded == 1 else 's'} recorded, {self.failed} failed"
        return line + (f" ({self.planned} cancelled after the window, as planned)" if self.planned else "")

    @property
    def hint(self) -> str | None:
        """The fix for the most frequent error, where a profile fixes it (`hint_for`)."""
        return hint_for(self.most_frequent) if self.failed and self.most_frequent else None

    def cause(self) -> str:
        """`most frequent (3x): HTTP 400: ...`, the fix where one is known (`hint`), and where the rest are;
        empty without a failure."""
        if not self.failed:
            return ""
        rest = self.failed - self.most_frequent_count
        hint = f"; {self.hint}" if self.hint else ""
        return f"most frequent ({self.most_frequent_count}x): {self.most_frequent}{hint}" + (
            f"; {rest} other failure{'' if rest == 1 else 's'} in requests.jsonl (error_kind, error_message)"
            if rest
            else ""
        )

    def line(self) -> str:
        """The requests' line: counts, and the most frequent error where any failed."""
        return self.counts() + (f"; {self.cause()}" if self.failed else "")

    def headline(self) -> str | None:
        """The line a run that measured nothing begins with; None for a run that measured something."""
        if not self.measured_nothing:
            return None
        if self.recorded == 0:
            return "the run measured nothing: no request was recorded"
        return f"the run measured nothing: {self.failed} of {self.recorded} requests failed; {self.cause()}"


def failures_of(run: Run) -> Failures:
    cancel_ns = min((e.t_ns for e in run.events if e.kind == "cancel" and e.t_ns is not None), default=None)
    planned = {
        id(r) for r in run.records if r.error_kind == "cancelled" and cancel_ns is not None and r.end_ns >= cancel_ns
    }
    failed = [r for r in run.records if not r.ok and id(r) not in planned]
    if not failed:
        return Failures(len(run.records), 0, len(planned))
    groups = Counter(_group(r) for r in failed)
    first: dict[tuple[str | None, int | None, str], RequestRecord] = {}
    for r in failed:
        first.setdefault(_group(r), r)
    key, times = groups.most_common(1)[0]  # ties: the group seen first
    return Failures(len(run.records), len(failed), len(planned), error_text(first[key]), times)


def error_text(record: RequestRecord) -> str:
    """A failed request's error in one line, as it was said (cut to SHOWN_CHARS)."""
    text = " ".join((record.error_message or record.error_kind or "failed, no error recorded").split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def _group(record: RequestRecord) -> tuple[str | None, int | None, str]:
    return record.error_kind, record.http_status, _DIGITS.sub("#", record.error_message or "")
