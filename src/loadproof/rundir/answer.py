"""One scored quality item, a row of `answers.jsonl` (docs/quality.md): ids, the extracted and expected
answers and the verdict, or `skipped` with the reason; never prompt text.

GSM8K rows carry the strict and flexible extractions and verdicts, retrieval rows `length_tokens` and
`depth`, authored rows `lang`; `error` is the error kind of a failed request (scored as wrong).
A run with `--under-load-rate` asks every item twice: its rows under load carry `under_load`, and every
asked row the sha256 of its whole answer; an answer that changed under load keeps, on its under-load row,
where the two first differ and a window of both (docs/quality.md, "Under load").

Version 1: the shape every run has written (none recorded a version).
"""

from __future__ import annotations

from typing import ClassVar

import msgspec


class Answer(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    version: ClassVar[int] = 1

    suite: str | None = None
    item_id: str = ""
    mode: str = "plain"
    request_id: str | None = None
    expected: str | None = None
    extracted: str | None = None
    correct: bool | None = None
    extracted_strict: str | None = None
    extracted_flexible: str | None = None
    correct_strict: bool | None = None
    correct_flexible: bool | None = None
    lang: str | None = None
    length_tokens: int | None = None
    depth: float | None = None
    skipped: str | None = None  # why the item was not asked
    error: str | None = None  # the failed request's error kind
    under_load: bool | None = None  # true: asked while the run's open-loop load ran (absent: idle)
    answer_sha256: str | None = None  # of the whole answer text (runs with --under-load-rate)
    answer_diff_at: int | None = None  # under load, a changed answer: the first character that differs
    answer_text: str | None = None  # ... the under-load answer's window from a little before it
    idle_answer_text: str | None = None  # ... and the idle answer's, the same window


__all__ = ["Answer"]
