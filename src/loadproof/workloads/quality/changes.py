"""Whether an answer changed under load (batch invariance): the whole answer's digest, and where two
answers first differ, with a window of each around it for the report.

With greedy decoding an engine whose kernels are batch-invariant answers the same request identically
whatever else it serves; one that is not may pick another token once the batch differs, and from there
the answers part. The digest compares the whole text (the run stores no answer text otherwise); the
window shows where they part, cut like an extracted answer.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

WINDOW_CHARS = 64  # the most of each answer a changed row keeps, as extracted answers are cut
LEAD_CHARS = 16  # the window starts this far before the first differing character


def digest(text: str) -> str:
    """sha256 of the answer's UTF-8 text, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Change:
    at: int  # the first character (index) where the two answers differ
    idle: str  # the idle answer's window
    under_load: str  # the under-load answer's window, the same characters


def change(idle: str, under_load: str) -> Change | None:
    """None when the answers are equal; else where they first differ and a window of each from
    `LEAD_CHARS` before it, at most `WINDOW_CHARS` long."""
    if idle == under_load:
        return None
    at = len(os.path.commonprefix([idle, under_load]))
    start = max(0, at - LEAD_CHARS)
    return Change(at, idle[start : start + WINDOW_CHARS], under_load[start : start + WINDOW_CHARS])
