"""The last check of `publish`: no secret or host name publish knows of is left anywhere in the bundle.

What is known (`known_secrets`):
- every value the sanitizer removed or saw under a secret-named field, flag, header or env pair, in the
  manifests and data (`Sanitizer.known_secrets`), and the whitespace-separated parts of such a value
  that look like credentials (`Token 9f8e7d6c5b4a` also gives `9f8e7d6c5b4a`);
- the values of this process's environment variables with secret-named names (`HF_TOKEN`,
  `VLLM_API_KEY`, `LOADPROOF_UPSTREAM_API_KEY`; not `PWD`/`OLDPWD`, which are folders), and of any
  variable a secret-named field names (`"api_key_env": "MY_VAR"`);
- the host names and addresses the sanitizer learned (this machine's, and every one in the runs).

Each is looked for in every file of the staged bundle (a compressed one's content, decompressed), byte for
byte, as written plainly (UTF-8), JSON-escaped (with and without `ensure_ascii`, once and twice) and
URL-encoded (`quote`, `quote_plus`).
Ignored, as too short or too common to mean anything: values under 4 characters (a host name learned
from the runs or this machine counts from 2), booleans and words like `none`/`auto`/`bearer`,
placeholders, a value that is itself a secret-named name of letters (`VLLM_API_KEY`, `api-key` name a
secret, they are not one; `--api-key` stays in every argv), a single word of letters under 8 characters
(`VLLM_API_KEY=test`: `test` is in every quality run's ids), a figure with its unit (`0.52 s`, which
`first token: 0.52 s` loses to the sanitizer and report.md prints), and numbers under 6 digits. A number is
looked for as a whole number (not inside a longer run of letters and digits), a host name as a whole
word, case-insensitively. A plain-word host name (`dgx`, no digit, dot or hyphen) is looked for in the
data files only: report.md and claims.json are rendered from those data files, and their own words
(capacity, window) could be a host's name; so are the words of the note publish writes (`tool_text`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, quote_plus

from loadproof.publish.names import field_kind, is_count
from loadproof.publish.sanitize import Sanitizer
from loadproof.publish.shapes import PLACEHOLDERS
from loadproof.store.files import ZST, read_content

MIN_CHARS = 4
MIN_HOST_CHARS = 2
MIN_DIGITS = 6
MIN_WORD_CHARS = 8  # a value of letters only, shorter than this, is a word, not a key
NOT_SECRETS = frozenset(
    """true false none null yes no on off auto default enabled disabled required optional
    bearer basic token digest unset empty changeme dummy placeholder""".split()
)
NOT_SECRET_VARIABLES = frozenset({"PWD", "OLDPWD"})
RENDERED = frozenset({"report.md", "claims.json"})  # rendered from the data files, in the tool's own words
ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
WORD = ALNUM + b"_"  # a host name is replaced where it is not inside a run of these (shapes.WORD_EDGE)
_CREDENTIAL_PART = re.compile(r"(?=[^\s]*[A-Za-z])(?=[^\s]*[0-9])[^\s]{8,}")
_FIGURE = re.compile(r"[+-]?\d[\d,.]*(?:\s+[A-Za-z%/][A-Za-z%/.]{0,15}|[A-Za-z%]{0,3})")  # 0.52 s, 1,536 tokens, 7.56x
_NAME_LIKE = re.compile(r"-{0,2}[A-Za-z_][A-Za-z_.\-]*")  # letters only: VLLM_API_KEY, api-key, vllm-secrets


def known_secrets(sanitizer: Sanitizer, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every secret value to look for, with what it is (the description never holds the value)."""
    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}

    def add(value: str, what: str) -> None:
        value = value.strip()
        if _meaningful(value):
            found.setdefault(value, what)
        for part in _CREDENTIAL_PART.findall(value):
            if part != value and _meaningful(part):
                found.setdefault(part, what)

    for value, what in sanitizer.known_secrets().items():
        add(value, what)
    for name, value in environ.items():
        kind = field_kind(name)
        if name not in NOT_SECRET_VARIABLES and (kind == "secret" or (kind == "count" and not is_count(value))):
            add(value, f"the value of the environment variable {name}")
    for name in sanitizer.env_references:
        if name in environ and name not in NOT_SECRET_VARIABLES:
            add(environ[name], f"the value of the environment variable {name}, which the run names")
    return found


def _meaningful(value: str) -> bool:
    if len(value) < MIN_CHARS or value.lower() in NOT_SECRETS or any(p in value for p in PLACEHOLDERS):
        return False
    if _NAME_LIKE.fullmatch(value) and field_kind(value) in ("secret", "count"):
        return False  # `VLLM_API_KEY`, `api-key` name a secret (`--api-key` stays in every argv)
    if _FIGURE.fullmatch(value) and not value.isdigit():
        return False  # `first token: 0.52 s` loses `0.52 s` to the sanitizer; it is a figure, in report.md too
    if value.isalpha() and len(value) < MIN_WORD_CHARS:
        return False  # `VLLM_API_KEY=test`: a short word is in every bundle (`gsm8k-test-0003`)
    return not (value.isdigit() and len(value) < MIN_DIGITS)


def encodings(value: str) -> set[bytes]:
    """The forms a value takes in a bundle's files: plain, JSON-escaped (once, twice), URL-encoded."""
    forms = {value, quote(value), quote(value, safe=""), quote_plus(value)}
    for ensure_ascii in (True, False):
        once = json.dumps(value, ensure_ascii=ensure_ascii)[1:-1]
        forms |= {once, json.dumps(once, ensure_ascii=ensure_ascii)[1:-1]}
    return {f.encode("utf-8") for f in forms if f}


def find_leak(
    folder: Path, secrets: Mapping[str, str], hosts: frozenset[str] | set[str], tool_text: str = ""
) -> str | None:
    """The first file under `folder` that holds a known secret or host name, as one line without the value.

    `tool_text` is text publish itself writes into the data files (the raw-data note): a plain-word host
    name that is one of its words is not looked for.
    """
    tool_words = {w.lower() for w in re.findall(r"[A-Za-z]+", tool_text)}
    needles = [(needle, value.isdigit(), what) for value, what in secrets.items() for needle in encodings(value)]
    host_needles = [
        (needle.lower(), name.isalpha(), "a host name or address of this machine or of the runs")
        for name in hosts
        if len(name) >= MIN_HOST_CHARS and name.lower() not in tool_words
        for needle in encodings(name)
    ]
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = read_content(path)  # a compressed file's content (NAME.jsonl.zst), not its compressed bytes
        where = path.relative_to(folder).as_posix()
        for needle, whole_number, what in needles:
            if _whole(data, needle, ALNUM) if whole_number else needle in data:
                return f"{where} holds {what}"
        lowered = data.lower()
        for needle, plain_word, what in host_needles:
            if plain_word and path.name.removesuffix(ZST) in RENDERED:
                continue
            if _whole(lowered, needle, WORD):
                return f"{where} holds {what}"
    return None


def _whole(data: bytes, needle: bytes, word: bytes) -> bool:
    """`needle` occurs in `data` not inside a longer run of `word` characters."""
    i = data.find(needle)
    while i >= 0:
        end = i + len(needle)
        if (i == 0 or data[i - 1] not in word) and (end >= len(data) or data[end] not in word):
            return True
        i = data.find(needle, i + 1)
    return False
