"""The sanitizer: rewrites run data by the declared kind of each field (publish.fields), so that no secret,
address, host name, URL, e-mail address or host path is published.

Each kind has one rule (the table is in publish.fields): free text and names go through the text
pipeline, a URL becomes `<url>`, a host `<host>` (`<ip>`), an absolute path `<path>`, a secret
`<secret>` whole, a number stays (a non-number where a number belongs becomes `<redacted>`), and a
user's configuration is read by its key names (publish.names). A field of no declared kind is
undeclared: its strings become `<redacted>` and its numbers stay, so nothing whose kind publish does not
know leaves unredacted. Numbers and booleans are never touched except under a secret-named name
(`{"password": 12345678}`), so the numbers claims are computed from cannot move.

The text pipeline (`text`): PEM private key blocks go whole; the scanner (publish.scanner) finds the
values secret-named names mark (`--api-key X`, `password: X`, `Authorization: Token X`, a leading `-`
or spaces whatever) and the hosts host-named ones mark (`--host X`); then every shape (publish.shapes:
key shapes, URLs, e-mail addresses, paths, addresses, dotted host names); then every learned host name.

Host names are learned (`learn`, on everything before anything is rewritten) from host fields and
host-named names, the hosts of URLs, `host=X` in text, and this machine (hostname, FQDN, aliases,
addresses); a dotted name also teaches its first label (`gpu7.acme.lab` teaches `gpu7`). Plain words are
learned too (`dgx`), except STOP_HOSTS: words loadproof itself uses (vllm, localhost, server, capacity,
english, ...), whose removal would say nothing private and would rename claims. Learned names are
replaced as whole words (not inside a longer run of letters, digits and `_`), case-insensitively.

What was removed is remembered (`known_secrets`, `known_hosts`) so that publish can refuse a bundle in
which any of it still appears (publish.leaks). Every step is linear in its input
(tests/unit/publish/test_sanitize_linear.py; benchmarks/sanitize_speed.py: 1 MB of free text).
"""

from __future__ import annotations

import functools
import re
import socket
from collections.abc import Iterable
from typing import Any, TypeVar

from loadproof.publish.fields import ARGV, CONFIG, HEADER, HOST, NAME, NUMBER, PATH, PLANTED, SECRET, TEXT, URL, Node
from loadproof.publish.names import IDENTIFIER_RE, NUMBER_RE, children, field_kind, is_count
from loadproof.publish.scanner import TRIGGERS, scan
from loadproof.publish.shapes import HOST as HOST_PLACEHOLDER
from loadproof.publish.shapes import PATH as PATH_PLACEHOLDER
from loadproof.publish.shapes import (
    PLACEHOLDERS,
    PUBLIC_HOSTS,
    REDACTED,
    STOP_HOSTS,
    WORD_EDGE,
    is_address,
    not_private_address,
    pem_blocks,
    replace_shapes,
    url_hosts,
)
from loadproof.publish.shapes import SECRET as SECRET_PLACEHOLDER
from loadproof.publish.shapes import URL as URL_PLACEHOLDER

__all__ = ["PLACEHOLDERS", "Sanitizer", "field_kind", "is_count", "this_machine"]

COUNT = "count"  # a count-like name (publish.names): a number stays, anything else is a secret
TEXT_KINDS = frozenset({TEXT, NAME, PLANTED})
_V = TypeVar("_V")  # a value as it came in: `_redacted` gives it back, or the secret placeholder (a string)
_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # an undeclared key kept as it is
_ABSOLUTE_PATH_RE = re.compile(r"[/~]|[A-Za-z]:[\\/]|\\\\")
_HOST_CHARS_RE = re.compile(r"[A-Za-z0-9._:%\-]+")


@functools.lru_cache(maxsize=1)
def this_machine() -> tuple[str, ...]:
    """This machine's host names and addresses: hostname, FQDN, their aliases and addresses."""
    names: list[str] = []
    for lookup in (socket.gethostname, socket.getfqdn):
        try:
            names.append(lookup())
        except OSError:
            pass
    try:
        host, aliases, addresses = socket.gethostbyname_ex(socket.gethostname())
        names += [host, *aliases, *addresses]
    except OSError:
        pass
    return tuple(dict.fromkeys(n for n in names if n))


class Sanitizer:
    """`learn`/`learn_declared` first, on everything to be published; then `declared` (a file's rows by
    their declared kinds), `value` (one value of one kind) or `text` on each part."""

    def __init__(self, known_hosts: Iterable[str] = (), include_this_machine: bool = True) -> None:
        self._known: set[str] = set()
        self._known_re: re.Pattern[str] | None = None
        self._secrets: dict[str, str] = {}
        self.env_references: set[str] = set()  # names of variables a secret-named field points at (api_key_env)
        for name in known_hosts:
            self._remember(name)
        if include_this_machine:
            for name in this_machine():
                self._remember(name)

    # what it knows ------------------------------------------------------------------------------------

    @property
    def known_hosts(self) -> frozenset[str]:
        return frozenset(self._known)

    def known_secrets(self) -> dict[str, str]:
        """Every secret value it has seen or removed, with what it was (never the value itself)."""
        return dict(self._secrets)

    def _secret(self, value: Any, what: str) -> None:
        if isinstance(value, dict):
            for v in value.values():
                self._secret(v, what)
        elif isinstance(value, list):
            for v in value:
                self._secret(v, what)
        elif isinstance(value, str):
            if value and value not in PLACEHOLDERS:
                self._secrets.setdefault(value, what)
                if IDENTIFIER_RE.fullmatch(value):
                    self.env_references.add(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._secrets.setdefault(str(value), what)

    def _remember(self, name: str) -> None:
        name = name.strip().strip("[]").rstrip(".")
        if len(name) < 2 or not _HOST_CHARS_RE.fullmatch(name) or NUMBER_RE.fullmatch(name):
            return
        low = name.lower()
        if low in STOP_HOSTS or low in PUBLIC_HOSTS or not_private_address(name) or name.strip(":") == "":
            return
        if name not in self._known:
            self._known.add(name)
            self._known_re = None
        if "." in name and not is_address(name):
            self._remember(name.split(".", 1)[0])

    def _remember_address(self, value: str) -> None:
        """The host of a URL, `host:port` or a bare host."""
        value = value.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
        self._remember(value.rsplit(":", 1)[0] if value.count(":") == 1 or value.startswith("[") else value)

    # learning ---------------------------------------------------------------------------------------

    def learn_declared(self, obj: Any, node: Node | None, name: str | None = None) -> None:
        """`learn` along a file's declared tree (publish.fields); `name` is the key an undeclared value sits under."""
        if node is None:
            self.learn(obj, field_kind(name) if name is not None else None)
        elif node.kind is not None and not node.children:
            self.learn(obj, node.kind)
        elif isinstance(obj, dict):
            for key, child in obj.items():
                self.learn_declared(child, node.child(str(key))[0], str(key))
        elif isinstance(obj, list):
            for child in obj:
                self.learn_declared(child, node.child("*")[0], name)
        else:
            self.learn(obj, node.kind)

    def learn(self, obj: Any, kind: str | None = None) -> None:
        """Collect host names (host fields, host-named names, URLs, `host=X`) and secret values, before rewriting.

        `kind` is the value's declared kind, or a kind its name gives it in a configuration (None: read by names).
        """
        if kind == SECRET:
            self._secret(obj, "a value under a secret-named field")
            return
        if isinstance(obj, (dict, list)):
            inherited = kind if kind in (HOST, COUNT) else None
            for _, child, child_kind in children(obj, inherited):
                self.learn(child, child_kind if kind in (None, CONFIG, ARGV, HEADER, HOST, COUNT) else kind)
        elif isinstance(obj, str):
            if kind == COUNT and not is_count(obj):
                self._secret(obj, "a value under a secret-named field")
            elif kind in (HOST, URL):
                self._remember_address(obj)
                self._learn_text(obj)
            elif kind != NUMBER:
                self._learn_text(obj)

    def _learn_text(self, s: str) -> None:
        for host in url_hosts(s):
            self._remember_address(host)
        s, spans = self._spans(s)
        for span in spans:
            if span.kind == "host":
                self._remember(s[span.start : span.end])
            else:
                self._secret(s[span.start : span.end], "a value after a secret-named name in text")

    def _spans(self, s: str) -> tuple[str, list[Any]]:
        """`s` with its PEM private key blocks replaced, and the scanner's spans in that text."""
        if "-----BEGIN" in s:
            parts, last = [], 0
            for a, b in pem_blocks(s):
                self._secret(s[a:b], "a PEM private key")
                parts += [s[last:a], SECRET_PLACEHOLDER]
                last = b
            s = "".join(parts) + s[last:]
        low = s.lower()
        return s, (scan(s) if any(word in low for word in TRIGGERS) else [])

    # rewriting ---------------------------------------------------------------------------------------

    def declared(self, obj: Any, node: Node | None, name: str | None = None) -> Any:
        """A sanitized copy of a file's row (or the manifest) by its declared tree (publish.fields)."""
        if node is None:
            return self._undeclared(obj, name)
        if node.kind is not None and not node.children:
            return self.value(obj, node.kind)
        if isinstance(obj, dict):
            out: dict[str, Any] = {}
            for key, child in obj.items():
                sub, exact = node.child(str(key))
                clean = str(key) if exact else self.text(str(key)) if sub is not None else self._undeclared_key(key)
                out[_distinct(clean, out)] = self.declared(child, sub, str(key))
            return out
        if isinstance(obj, list):
            return [self.declared(child, node.child("*")[0], name) for child in obj]
        return self.value(obj, node.kind) if node.kind is not None else self._undeclared(obj, name)

    def _undeclared(self, obj: Any, name: str | None) -> Any:
        """Strings become <redacted>, numbers stay; under a secret-named (or count-like) name publish.names decides."""
        kind = field_kind(name) if name is not None else None
        if kind == SECRET or (kind == COUNT and not isinstance(obj, (dict, list)) and not is_count(obj)):
            return self._redacted(obj)
        if isinstance(obj, dict):
            out: dict[str, Any] = {}
            for key, child in obj.items():
                out[_distinct(self._undeclared_key(key), out)] = self._undeclared(child, str(key))
            return out
        if isinstance(obj, list):
            return [self._undeclared(child, name) for child in obj]
        if isinstance(obj, str) and obj and obj not in PLACEHOLDERS:
            return REDACTED
        return obj

    def _undeclared_key(self, key: Any) -> str:
        key = str(key)
        return key if _PLAIN_KEY_RE.fullmatch(key) and self.text(key) == key else REDACTED

    def value(self, obj: Any, kind: str | None = None) -> Any:
        """A sanitized copy of a JSON value of one declared kind (publish.fields); None: a configuration."""
        if kind in (None, CONFIG, ARGV):
            return self._configured(obj, None)
        if kind == SECRET:
            return self._redacted(obj)
        if kind == HEADER and isinstance(obj, dict):
            return self._configured(obj, None)
        if isinstance(obj, dict):
            out: dict[str, Any] = {}
            for key, child in obj.items():
                out[_distinct(self.text(str(key)), out)] = self.value(child, kind)
            return out
        if isinstance(obj, list):
            return [self.value(child, kind) for child in obj]
        if not isinstance(obj, str):
            return obj  # numbers, booleans and null are never touched
        if kind == NUMBER:
            return obj if is_count(obj) else REDACTED
        if kind in TEXT_KINDS:
            return self.text(obj)
        if kind == URL:
            return URL_PLACEHOLDER if obj and obj not in PLACEHOLDERS else obj
        if kind == PATH:
            return PATH_PLACEHOLDER if _ABSOLUTE_PATH_RE.match(obj) else self.text(obj)
        if kind == HEADER:
            header, colon, rest = obj.partition(":")
            secret = colon and field_kind(header.strip()) in (SECRET, COUNT) and not is_count(rest)
            return f"{header}: {self._redacted(rest.strip())}" if secret else self.text(obj)
        return self.field(obj, kind)

    def _configured(self, obj: Any, kind: str | None) -> Any:
        """A configuration's value, read by its names: `kind` is the one its name gives it (publish.names)."""
        if kind == SECRET:
            return self._redacted(obj)
        if isinstance(obj, dict):
            out: dict[str, Any] = {}
            for key, child, child_kind in children(obj, kind):
                out[_distinct(self.text(str(key)), out)] = self._configured(child, child_kind)
            return out
        if isinstance(obj, list):
            return [self._configured(child, child_kind) for _, child, child_kind in children(obj, kind)]
        if isinstance(obj, str):
            return self.field(obj, kind)
        return obj

    def _redacted(self, obj: _V) -> _V | str:
        if obj is None or isinstance(obj, bool) or obj in ("", [], {}) or obj in PLACEHOLDERS:
            return obj
        self._secret(obj, "a value under a secret-named field")
        return SECRET_PLACEHOLDER

    def field(self, value: str, kind: str | None) -> str:
        """A string under a name of `kind` (publish.names: secret, count, host, or None)."""
        if kind == SECRET or (kind == COUNT and not is_count(value)):
            return self._redacted(value)
        if kind == COUNT:  # a number or a token-count distribution: nothing private in it
            return value
        cleaned = self.text(value)
        if kind == HOST and cleaned not in PLACEHOLDERS and cleaned != "":
            return HOST_PLACEHOLDER
        return cleaned

    def text(self, s: str) -> str:
        """Every private thing in free text replaced by its placeholder."""
        if not s:
            return s
        s, spans = self._spans(s)
        if spans:
            parts, last = [], 0
            for span in spans:
                parts.append(s[last : span.start])
                if span.kind == "secret":
                    self._secret(s[span.start : span.end], "a value after a secret-named name in text")
                    parts.append(SECRET_PLACEHOLDER)
                else:
                    parts.append(HOST_PLACEHOLDER)
                last = span.end
            s = "".join(parts) + s[last:]
        s = replace_shapes(s, self._shaped_key)
        if self._known:
            if self._known_re is None:
                names = sorted(self._known, key=len, reverse=True)
                self._known_re = re.compile(
                    rf"(?<![{WORD_EDGE}])(?:" + "|".join(map(re.escape, names)) + rf")(?![{WORD_EDGE}])", re.IGNORECASE
                )
            s = self._known_re.sub(HOST_PLACEHOLDER, s)
        return s

    def _shaped_key(self, m: re.Match[str]) -> str:
        self._secret(m.group(0), "an API key or token by its shape")
        return SECRET_PLACEHOLDER


def _distinct(key: str, taken: dict[str, Any]) -> str:
    """Two keys that sanitize alike both survive: the second gets a `~`."""
    while key in taken:
        key += "~"
    return key
