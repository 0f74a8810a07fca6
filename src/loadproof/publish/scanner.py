"""The free-text scanner: finds the values that secret-named and host-named names mark in a text.

Secrets go by where they sit, not by their shape: `NAME=VALUE`, `NAME: VALUE`, `"NAME": VALUE`,
`--NAME VALUE`, `--NAME=VALUE`, `"--NAME", "VALUE"`, with NAME secret-named (publish.names). A quoted value
goes to its closing quote (`'...'`, `"..."`, `\\"...\\"` escaped once or more, escaped quotes inside
skipped); an unquoted value after `NAME:` goes to the end of the line (headers: `Authorization: Token x`,
`Cookie: a=b`, any scheme), after `NAME = ` (spaced, INI style) to the end of the line, after `"NAME":`
to the end of the JSON scalar, after `NAME=` or a flag to the end of the argument, whatever it looks
like (a leading `-` included: only a word shaped like a flag, `--api-key`, is one). `Bearer X`,
`Basic <base64 user:pass>` and `curl -u user:pass` / `--user` lose their credential; a
`"name": "SECRET_NAME", ... "value": X` pair in JSON text loses X. A bare `token:` or `key:` in prose
(`first token: 0.52 s`) loses what follows: better a lost figure in a note than a key. Under a
count-like name (`max_tokens=128`) a number stays. `--host X`, `host=X`, `"host": "X"` mark X as a host.

Linear: the candidate regex reads each run of name characters once and only stops at names holding a
TRIGGER; a value that goes is skipped whole; a value that stays is measured only as far as needed.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from loadproof.publish.names import (
    AUTH_SCHEMES,
    CANONICAL_FLAG_RE,
    IDENTIFIER_RE,
    NUMBER_RE,
    PAIR_NAME_KEYS,
    PAIR_VALUE_KEYS,
    field_kind,
    secret_flag,
)
from loadproof.publish.shapes import PLACEHOLDERS, is_address

_HOSTISH_RE = re.compile(r"\[?([A-Za-z0-9][A-Za-z0-9.\-]*+)\]?(?::\d{1,5})?")
# Words one of which is in every name the scanner acts on: a secret-, count- or host-named name
# (publish.names), a pair's name or value key, `Bearer`/`Basic`, curl's `-u`/`--user`. The scanner
# looks for these (in the text lowered, ASCII only, so positions keep) and reads only the names around them.
TRIGGERS = (
    "pass",
    "pw",
    "secret",
    "cred",
    "cookie",
    "auth",
    "key",
    "bearer",
    "basic",
    "jwt",
    "sig",
    "otp",
    "session",
    "csrf",
    "xsrf",
    "hmac",
    "token",
    "host",
    "node",
    "server",
    "upstream",
    "fqdn",
    "machine",
    "instance",
    "ip",
    "addr",
    "val",
    "name",
    "var",
    "header",
    "param",
    "user",
    "-u",
)
_TRIGGER_RE = re.compile("|".join(map(re.escape, TRIGGERS)))
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_NAME_RUN_RE = re.compile(r"[A-Za-z0-9_.\-]*+")
# a candidate name, its closing quote and a separator; names start where a run of name characters starts
_CANDIDATE_RE = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_.\-]++)(?P<close>\\*+[\"'])?"
    r"(?P<sep>[ \t]*+(?:=>|=(?!=)|:(?![:/=]))[ \t]*+|[ \t]++|,[ \t]*+)"
)
_QUOTE_RE = re.compile(r"\\*+[\"']")
_WORD_END_RE = re.compile(r"(?:[^\s\"'`\\]|\\(?![\"']))*+")
_SCALAR_END_RE = re.compile(r"[^\s,;}\])\"'\\]*+")
_BLANKS_RE = re.compile(r"[ \t]++")
_BASIC_RE = re.compile(r"[A-Za-z0-9+/]{8,}+={0,2}")


def basic_credential(value: str) -> bool:
    """`Basic X`: X is base64 of user:password (or looks like a key: a digit, +, / or = in it)."""
    if not _BASIC_RE.fullmatch(value):
        return False
    if any(c in value for c in "0123456789+/="):
        return True
    try:
        return b":" in base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False


# the free-text scanner ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    kind: str  # "secret" or "host"
    start: int
    end: int


def _quoted(s: str, q: re.Match[str]) -> tuple[int, int, int]:
    """(inner start, inner end, end) of the value opened by quote `q`: `"`, `'`, `\\"` (k backslashes).

    The closing quote is the next one preceded by b backslashes with b % 2(k+1) == k: for a plain quote an
    even count, for `\\"` (escaped once) 1 or 5 but not 3 (an escaped quote inside the escaped string).
    No closing quote: the value runs to the end of the text.
    """
    k, char, start = q.end() - q.start() - 1, s[q.end() - 1], q.end()
    i = start
    while True:
        idx = s.find(char, i)
        if idx < 0:
            return start, len(s), len(s)
        b = 0
        while idx - b - 1 >= start and s[idx - b - 1] == "\\":
            b += 1
        if b % (2 * (k + 1)) == k:
            return start, idx - k, idx + 1
        i = idx + 1


def _line_end(s: str, pos: int) -> int:
    end = len(s)
    for stop in ("\n", "\r"):
        i = s.find(stop, pos, end)
        if i >= 0:
            end = i
    while end > pos and s[end - 1] in " \t":
        end -= 1
    return end


class _Scanner:
    """One forward pass over a text, finding the values that go (module docstring, "Free text").

    Linear: the candidate regex tries each run of name characters once; a value that goes is skipped
    whole; a value that stays (a count, a name that is not a secret) is measured only as far as needed
    (a number, an identifier, at most HOST_MAX characters) and scanned on; the end of the current word
    is remembered, so names inside one long word never measure it again.
    """

    HOST_MAX = 300

    def __init__(self, s: str) -> None:
        self.s = s
        self.spans: list[Span] = []
        self.word = (0, -1)  # the last word measured: [start, end]
        self.cursor, self.newline_at, self.curl_at = 0, -1, -1
        self.pair: str | None = None  # a `"name": "SECRET_NAME"` seen, waiting for its "value"
        self.pair_at = 0

    def word_end(self, start: int) -> int:
        if not self.word[0] <= start <= self.word[1]:
            self.word = (start, _WORD_END_RE.match(self.s, start).end())  # type: ignore[union-attr]  # a `*+` pattern matches the empty string: never None
        return self.word[1]

    def after_curl(self, at: int) -> bool:
        """Whether `curl` comes before `at` on its line (tracked incrementally: each character seen once)."""
        s = self.s
        i = s.rfind("\n", self.cursor, at)
        self.newline_at = i if i >= 0 else self.newline_at
        j = s.rfind("curl", max(0, self.cursor - 3), at)
        self.curl_at = j if j >= 0 else self.curl_at
        self.cursor = at
        return self.curl_at > self.newline_at

    def run(self) -> list[Span]:
        """Each run of name characters holding a trigger, from its start; each character is walked back over
        at most once (the search moves on past the run, or past the value it marks)."""
        s, pos = self.s, 0
        low = s.translate(_ASCII_LOWER)
        while True:
            hit = _TRIGGER_RE.search(low, pos)
            if hit is None:
                return self.spans
            start = hit.start()
            while start > pos and s[start - 1] in NAME_CHARS:
                start -= 1
            m = None if start > 0 and s[start - 1] in NAME_CHARS else _CANDIDATE_RE.match(s, start)
            if m is not None:
                pos = self.candidate(m)
            else:  # not a name's start (the run began before `pos`) or no separator: on past the run
                pos = _NAME_RUN_RE.match(s, hit.end()).end()  # type: ignore[union-attr]  # a `*+` pattern matches the empty string: never None

    def candidate(self, m: re.Match[str]) -> int:
        """Handle one `NAME SEP`; the position to scan on from."""
        s = self.s
        name, close, sep = m.group("name"), m.group("close") or "", m.group("sep")
        start = m.end()
        lname = name.lower()
        if self.pair is not None and s.find("}", self.pair_at, m.start()) >= 0:
            self.pair = None  # the object that named the secret has ended
        self.pair_at = m.start()
        kind: str | None = None
        if sep.startswith(","):  # `"--api-key", "VALUE"` in a JSON or Python list
            if not (close and name.startswith("-")):
                return start
            kind, style = field_kind(name), "word"
        elif not sep.strip():
            style = "word"
            if name.startswith("-"):
                kind = field_kind(name)
                if kind is None and lname in ("-u", "--user") and self.after_curl(m.start()):
                    kind = "secret"
            elif lname in ("bearer", "basic"):
                kind = lname
        else:
            kind = field_kind(name)
            if lname in PAIR_VALUE_KEYS and self.pair is not None:
                kind, self.pair = self.pair, None
            if close:
                style = "scalar"
            elif ":" in sep or (sep[0] in " \t" and sep.rstrip()[-1] in "=>"):
                style = "line"
            else:
                style = "word"
            if lname in PAIR_NAME_KEYS:
                q = _QUOTE_RE.match(s, start)
                ident = IDENTIFIER_RE.match(s, q.end() if q else start)
                if ident is not None and field_kind(ident.group()) in ("secret", "count"):
                    self.pair = field_kind(ident.group())
        if kind is None:
            return start
        q = _QUOTE_RE.match(s, start)
        if kind == "count":
            number = NUMBER_RE.match(s, q.end() if q else start)
            if number is not None and self.value_ends(number.end(), q):
                return start  # a count: it stays, and what follows is scanned
            kind = "secret"
        if kind == "host":
            return self.host(start, q, style, sep)
        if kind == "basic":
            end = self.word_end(start)
            if q is not None or not basic_credential(s[start:end]):
                return start
            kind = "secret"
        if q is not None:
            inner_start, inner_end, end = _quoted(s, q)
        else:
            inner_start = start
            if style == "line":
                end = _line_end(s, start)
            elif style == "scalar":
                end = _SCALAR_END_RE.match(s, start).end()  # type: ignore[union-attr]  # a `*+` pattern matches the empty string: never None
            else:
                end = self.word_end(start)
            inner_end = end
        if inner_end <= inner_start:
            return start
        if inner_end - inner_start <= 8 and s[inner_start:inner_end] in PLACEHOLDERS:
            return end
        if q is None and style == "word":  # measured without copying the value: it may be long
            head = s[inner_start:inner_end].lower() if inner_end - inner_start <= 64 else ""
            if name.startswith("-") and not sep.strip() and secret_flag(head):
                return start  # `--api-key --api-key KEY`: the second flag owns the value
            if lname == "bearer" and head == "bearer":
                return start
            word_start = inner_start
            if head in AUTH_SCHEMES:  # `Authorization=Bearer X`: the credential follows the scheme
                blanks = _BLANKS_RE.match(s, end)
                if blanks is not None:
                    word_start, end = blanks.end(), self.word_end(blanks.end())
                    inner_end = end
            cut = self.embedded_name(word_start, inner_end)
            if cut is not None:  # `--api-key (--api-key KEY`: the value stops where a secret name starts
                if s[inner_start:cut].strip("([{<\"'`,;:= \t") == "":
                    return cut
                end = inner_end = cut
        self.spans.append(Span("secret", inner_start, inner_end))
        return max(end, start)

    def value_ends(self, at: int, q: re.Match[str] | None) -> bool:
        s = self.s
        if q is not None:
            return s.startswith(q.group(), at)  # the closing quote, as escaped as the opening one
        return at >= len(s) or not (s[at].isalnum() or s[at] == "_")

    def host(self, start: int, q: re.Match[str] | None, style: str, sep: str) -> int:
        """`--host X`, `host=X`, `"host": "X"`: X (a name, not an address or a number) becomes <host>."""
        s = self.s
        if style == "line" and ":" in sep:
            return start  # `server: vLLM 0.6 started` is prose, not an assignment
        if q is not None:
            inner_start = q.end()
            close = s.find(q.group()[-1], inner_start, inner_start + self.HOST_MAX)
            if close < 0:
                return start
            inner_end = end = close - (len(q.group()) - 1)
        else:
            inner_start, end = start, self.word_end(start)
            if style == "scalar":
                end = _SCALAR_END_RE.match(s, start, min(end, start + self.HOST_MAX)).end()  # type: ignore[union-attr]  # a `*+` pattern matches the empty string: never None
            inner_end = end
        if inner_end - inner_start > self.HOST_MAX or inner_end <= inner_start:
            return start
        found = _HOSTISH_RE.fullmatch(s, inner_start, inner_end)
        if (
            found is None
            or is_address(found.group(1))
            or NUMBER_RE.fullmatch(found.group(1))
            or found.group(1).lower() in AUTH_SCHEMES
            or field_kind(found.group(1)) == "secret"
        ):
            return start  # not a host name (an address goes by its own rule; `--host Bearer X` is scanned on)
        self.spans.append(Span("host", found.start(1), found.end(1)))
        return max(end, start)

    def embedded_name(self, start: int, end: int) -> int | None:
        """Where, in the word value [start, end), a secret-named name or `Bearer` begins, if anywhere
        (`--api-key token: KEY`: the flag's value is empty and `token:` owns KEY)."""
        s, at = self.s, start
        while at < end:
            m = _CANDIDATE_RE.search(s, at, min(len(s), end + 16))
            if m is None or m.start() >= end:
                return None
            name, sep = m.group("name"), m.group("sep")
            # a word starting with `-` is a flag only when shaped like one (`--api-key`): `-000000000000PW`
            # after `--api-key` is its value, even though `PW` names a secret (issue #25)
            flag = CANONICAL_FLAG_RE.fullmatch(name) is not None
            if (field_kind(name) == "secret" and (flag or (sep.strip() and not name.startswith("-")))) or (
                name.lower() == "bearer" and not sep.strip()
            ):
                return m.start()
            at = m.end()
        return None


def scan(s: str) -> list[Span]:
    """Secret values (and host values) after secret-named (host-named) names in free text, in order."""
    return _Scanner(s).run()
