"""Bundle text on a terminal: every string that came from a bundle passes through `shown` before print.

A bundle is a stranger's file. A claim named `x\\x1b[2K\\x1b[32mVERIFIED: 99/99 claims ok` must not erase
the line and paint a verdict, a carriage return must not overwrite one, a bidi override must not
reorder one, a lone surrogate (valid in JSON, not in UTF-8) must not crash the print. So every
control character (C0, DEL, C1), format character (bidi embeddings, overrides and isolates, zero-width
marks), line or paragraph separator and surrogate becomes a visible escape (`\\x1b`, `\\u202e`), and a
string longer than `MAX_SHOWN_CHARS` is cut, saying by how much.
"""

from __future__ import annotations

import re
import unicodedata

MAX_SHOWN_CHARS = 300
_PLAIN = re.compile(r"[\x20-\x7e]*")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def unsafe_char(ch: str) -> bool:
    return unicodedata.category(ch) in _UNSAFE_CATEGORIES


def shown(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """`text` safe to print: control and format characters escaped, at most `limit` characters kept."""
    if not isinstance(text, str):  # callers pass strings; never risk repr() of a crafted value
        text = f"<{type(text).__name__}>"
    cut = len(text) - limit
    if cut > 0:
        text = text[:limit]
    if not _PLAIN.fullmatch(text):
        text = "".join(_escape(ch) if unsafe_char(ch) else ch for ch in text)
    return text + (f"...({cut:,} more characters)" if cut > 0 else "")


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
