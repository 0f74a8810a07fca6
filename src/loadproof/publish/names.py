"""What a name says about the value it names: a field, flag, header or environment variable name.

`field_kind(name)` is "secret", "count", "host" or None. A name is split into words on `_`, `-`, `.`,
spaces and camelCase (`X-Api-Key`, `apiKey`, `env.VLLM_API_KEY`; trailing digits dropped: `key2`).

- Secret: a word is one of SECRET_WORDS (password, passwd, pass, pw, pwd, passphrase, secret, auth,
  authorization, credential, cookie, signature, bearer, jwt, otp, sessionid, ...) or ends like one
  (`dbpassword`, `oauth`, `xapikey`); or a word is `token`/`key` (or ends in `token`: `hftoken`). A name
  whose last word is `error`/`exception`/`warning` (`KeyError`) names an error type, not a secret.
- Count: `token` and `key` are ambiguous; `max_tokens` is a count, not a credential. A name whose only
  secret words are token(s)/key(s) is count-like when one of them is plural (`tokens`, `keys`), is not
  the last word (`first_token_ns`, `token_count`, `api_key_used`) or sits beside a count word
  (COUNT_WORDS: num, max, min, count, total, len, size, limit, budget, per, ns, s, ...). Under a
  count-like name a number, a numeric string, a boolean or null stays (`is_count`); anything else goes.
  `session` alone is not a secret word (capacity sessions are what loadproof measures; `session_id`
  names a probe session); session cookies go with their `Cookie:` header, `sessionid`, `session_token`.
- Host: the last word is one of HOST_FIELDS (host, hostname, node, server, upstream, instance, ip,
  addr, ...) or the name is one of HOST_NAMES (`head_address`, `MASTER_ADDR`, ...).

The sanitizer applies these where a value's kind is not declared (a user's configuration, free text,
an undeclared field): publish.fields declares the rest.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

SECRET_WORDS = frozenset(
    """password passwd passphrase pass pw pwd secret secrets credential credentials cred creds
    cookie cookies authorization auth authn authz oauth apikey bearer jwt signature sig otp totp privatekey
    sessionid sessiontoken sessionkey csrf xsrf hmac""".split()
)
SECRET_SUFFIXES = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "credential",
    "credentials",
    "cookie",
    "privatekey",
    "auth",
)
AMBIGUOUS_WORDS = frozenset({"token", "tokens", "key", "keys"})
COUNT_WORDS = frozenset(
    """num n max min count counts total len length size limit budget per rate ratio pct perc
    percent avg mean median ns us ms s sec secs seconds usage id ids index idx first last""".split()
)
NOT_SECRET_LAST = frozenset({"error", "errors", "exception", "warning"})
HOST_FIELDS = frozenset(
    {
        "host",
        "hostname",
        "hostnames",
        "hosts",
        "node",
        "nodename",
        "server",
        "upstream",
        "fqdn",
        "machine",
        "instance",
        "ip",
        "addr",
        "address",
    }
)
HOST_NAMES = frozenset({"head_address", "node_name", "host_name", "master_addr", "master_address"})
AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "ntlm", "apikey", "key"})
PAIR_NAME_KEYS = frozenset({"name", "key", "variable", "var", "header", "param", "parameter"})
PAIR_VALUE_KEYS = frozenset({"value", "val"})

_WORD_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
NUMBER_RE = re.compile(r"[+-]?\d[\d,_]*+(?:\.\d++)?+(?:[eE][+-]?\d++)?+")
# a token-count distribution as `run load --input-tokens/--output-tokens` take it (workloads.synthetic)
LENGTHS_RE = re.compile(r"(?:uniform|normal|lognormal):\d++(?:\.\d++)?+(?::\d++(?:\.\d++)?+)++")
IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+")
CANONICAL_FLAG_RE = re.compile(r"--[a-z][a-z0-9]*+(?:[-_][a-z0-9]++)*+")


def _words(name: str) -> list[str]:
    return [w.lower().rstrip("0123456789") or w.lower() for w in _WORD_SPLIT_RE.split(name) if w]


def field_kind(name: str) -> str | None:
    """'secret', 'count', 'host' or None, from a field, flag, header or variable name (module docstring)."""
    return _cached_kind(name) if len(name) <= 80 else _kind(name)


def _kind(name: str) -> str | None:
    words = _words(name)
    if not words or words[-1] in NOT_SECRET_LAST:
        return None
    if any(w in SECRET_WORDS or w.endswith(SECRET_SUFFIXES) for w in words):
        return "secret"
    ambiguous = [i for i, w in enumerate(words) if w in AMBIGUOUS_WORDS or w.endswith(("token", "tokens"))]
    if ambiguous:
        if (
            any(words[i].endswith("s") for i in ambiguous)
            or ambiguous[-1] != len(words) - 1
            or any(w in COUNT_WORDS for w in words)
        ):
            return "count"
        return "secret"
    if words[-1] in HOST_FIELDS or name.lower().lstrip("-").replace("-", "_") in HOST_NAMES:
        return "host"
    return None


_cached_kind = functools.lru_cache(maxsize=8192)(_kind)


def is_count(value: Any) -> bool:
    """What may stay under a count-like name: a number, a numeric string, a token-count distribution
    (`uniform:8:24`, `lognormal:512:0.6`), a boolean, null."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    return isinstance(value, str) and (
        NUMBER_RE.fullmatch(value.strip()) is not None or LENGTHS_RE.fullmatch(value.strip()) is not None
    )


def secret_flag(item: str) -> bool:
    """A real `--flag` with a secret-named name: the value after it, not a value itself."""
    return CANONICAL_FLAG_RE.fullmatch(item) is not None and field_kind(item) in ("secret", "count")


def children(obj: dict[str, Any] | list[Any], kind: str | None) -> Iterator[tuple[Any, Any, str | None]]:
    """(key or index, child, the kind its name gives the child) for a dict or a list of a configuration.

    In a dict a child's own key decides, else the kind its parent sits under; a `{"name"|"key": SECRET_NAME,
    "value": X}` pair (Kubernetes env lists) gives X the name's kind. In a list (a command line) the item
    after a secret-named flag (`--api-key`) is a secret, even if it starts with `-`, unless it is itself a
    secret-named `--flag`; after curl's `-u`/`--user` too; a two-item `[name, value]` list with a
    secret-named name gives its value that kind.
    """
    if isinstance(obj, dict):
        pair = None
        for name_key in PAIR_NAME_KEYS & {str(k).lower() for k in obj}:
            named = next(v for k, v in obj.items() if str(k).lower() == name_key)
            if isinstance(named, str) and field_kind(named) in ("secret", "count"):
                pair = field_kind(named)
        for key, child in obj.items():
            child_kind = pair if pair is not None and str(key).lower() in PAIR_VALUE_KEYS else None
            yield key, child, child_kind or field_kind(str(key)) or kind
        return
    pending: str | None = None
    curl = False
    if (
        len(obj) == 2
        and isinstance(obj[0], str)
        and not obj[0].startswith("-")
        and field_kind(obj[0]) in ("secret", "count")
    ):
        pending = field_kind(obj[0])  # a `[name, value]` header or variable pair
        yield 0, obj[0], kind
        yield 1, obj[1], pending
        return
    for i, item in enumerate(obj):
        if pending is not None and not (isinstance(item, str) and secret_flag(item)):
            yield i, item, pending
            pending = None
            continue
        pending = None
        yield i, item, kind
        if isinstance(item, str):
            curl = curl or item.rsplit("/", 1)[-1] == "curl"
            if item.startswith("-") and "=" not in item:
                pending = field_kind(item)
                if pending is None and curl and item in ("-u", "--user"):
                    pending = "secret"
