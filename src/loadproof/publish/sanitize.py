"""The sanitizer: strips addresses, hostnames, URLs, secrets, e-mail addresses and host paths from run data.

It works on any JSON value: every string at any depth, dict keys included, is rewritten; numbers and
booleans pass through untouched, so the numbers claims are computed from cannot change. What it
removes becomes a typed placeholder:

    <url>     scheme://anything                       https://gpu7.corp:8000/v1, file:///srv/x
    <email>   local@domain                            ops@example.com, root@gpu-node-7
    <secret>  API keys and tokens                     sk-..., hf_..., ghp_..., Bearer ..., JWTs,
              values of fields and flags named like   api_key, HF_TOKEN, --api-key X, password=...
              key / token / secret / password / authorization
    <ip>      IPv4 and IPv6 addresses, loopback too   127.0.0.1, 10.0.0.5:8000, ::1, fe80::1%eth0
    <host>    FQDNs with a real-world suffix,         node7.cluster.internal, localhost, ip-10-0-0-5,
              host:port, values of host-named fields  (host, hostname, node, upstream, instance, ...),
              and hostnames learned from those fields and from this machine, wherever they recur
    <path>    absolute host paths                     /home/alice/x, /root, /tmp/y, ~/models, C:\\Users\\x

Values it leaves alone on purpose: model names (`meta-llama/Llama-3.1-8B`, `embedded:gemma3-270m`),
versions (`0.32.0`), metric names (`vllm:num_requests_running`), claim names, relative paths, API routes
(`/v1/models`), file names (`report.md`, `kv_cache_utils.py:2327`), git hashes, cache salts, image
digests (`vllm/vllm-openai@sha256:...`) and a few public registries (PUBLIC_HOSTS).
A bare hostname with no dot, digit or hyphen (`myserver`) is only caught in a host-named field.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from typing import Any

PLACEHOLDERS = ("<url>", "<email>", "<secret>", "<ip>", "<host>", "<path>")

# Suffixes that make a dotted name a hostname. Real TLDs that are also common file extensions
# (py, md, sh, rs, pl, so, zip, mov, ...) are left out on purpose: `report.md` is a file, not Moldova.
HOST_SUFFIXES = frozenset("""
    com net org edu gov mil int info biz io ai co dev app cloud tech xyz online site top me tv cc
    us uk de fr nl eu ch at be se no fi dk es pt ie it cz sk ro hu gr il in jp cn kr tw hk sg au nz ca
    br mx ar ru ua tr za
    local lan internal intranet corp home localdomain localhost private cluster example test invalid arpa
""".split())
# Public hosts a reader needs to see (where an image or a model came from); never private endpoints.
PUBLIC_HOSTS = frozenset({"docker.io", "ghcr.io", "nvcr.io", "quay.io", "huggingface.co", "github.com", "pypi.org"})
# The first folders of absolute paths that name a host's file system even alone (`/root`, `/tmp`).
HOST_ROOTS = frozenset("""home root tmp work workspace mnt data opt srv var usr scratch nfs lustre gpfs users
    private etc proc sys dev run media models cache""".split())
API_ROUTE_ROOTS = frozenset({"v1", "v2"})  # `/v1/chat/completions` is an API route, not a host path

_SECRET_ALWAYS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "secrets", "authorization",
                            "credential", "credentials", "cookie", "cookies"})
_SECRET_SHAPED = frozenset({"key", "apikey", "token", "auth", "bearer", "signature"})
_HOST_FIELDS = frozenset({"host", "hostname", "hostnames", "hosts", "node", "nodename", "server", "upstream",
                          "fqdn", "machine", "instance", "ip", "addr", "address"})

_KEY_PATTERNS = [
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{8,}",  # OpenAI, Anthropic
    r"hf_[A-Za-z0-9]{8,}",  # Hugging Face
    r"gh[pousr]_[A-Za-z0-9]{16,}", r"github_pat_[A-Za-z0-9_]{16,}",
    r"glpat-[A-Za-z0-9_-]{16,}", r"xox[abprs]-[A-Za-z0-9-]{10,}", r"nvapi-[A-Za-z0-9_-]{16,}",
    r"AKIA[0-9A-Z]{16}", r"AIza[0-9A-Za-z_-]{30,}",
    r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
]
_KEY_RE = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_KEY_PATTERNS) + r")")
_BEARER_RE = re.compile(r"(?i)\bbearer\s+(?:(?!bearer\s)[A-Za-z0-9._~+/=-])+|\bBasic\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}")
# `api_key=...`, `"password": "..."`, `--hf-token X` inside free text
_SECRET_NAME = (r"[A-Za-z0-9_-]*?(?:api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|token|secret|password"
                r"|passwd|pwd|authorization)(?![A-Za-z0-9])(?:[_-][A-Za-z0-9]+)*")
# a value ends where another secret flag or assignment begins (`--api-key (--api-key KEY`,
# `--api-key=token: KEY`): else that one's value, swallowed into this one's, would never be seen
_NO_FLAG = r"(?!--" + _SECRET_NAME + r"[\s=]|" + _SECRET_NAME + r"[\"']?\s*[=:])"
_ASSIGN_RE = re.compile(r"(?i)(?<![A-Za-z0-9_-])(" + _SECRET_NAME + r"[\"']?)(\s*[=:]\s*[\"']?)((?:" + _NO_FLAG
                        + r"[^\s\"',;}\]])+)")
_FLAG_RE = re.compile(r"(?i)(?<![A-Za-z0-9_-])(--?" + _SECRET_NAME + r")(\s+)(" + _NO_FLAG + r"[^\s\"',;}\]-](?:"
                      + _NO_FLAG + r"[^\s\"',;}\]])*)")
_URL_RE = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]*")
_EMAIL_RE = re.compile(r"(?<![\w.%+-])[\w.%+-]+@(?!(?:sha\d+|md5):)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_WIN_PATH_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:[\\/][^\s\"'<>|]*|\\\\[^\s\"'<>|\\]+\\[^\s\"'<>|]*")
_HOME_PATH_RE = re.compile(r"(?<![\w/.])~[\w.-]*(?:/[\w.@+%=~-]+)+/?")
_POSIX_PATH_RE = re.compile(r"(?<![\w.~/\\-])(?:/[\w.@+%=~-]+)+/?")
_IPV4_RE = re.compile(r"(?<!\d)(?<!\d\.)(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
_IPV6_RUN_RE = re.compile(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[A-Za-z0-9_.-]+)?")
_AWS_HOST_RE = re.compile(r"(?<![\w-])ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?![\w])")
_FQDN_RE = re.compile(r"(?<![\w.-])((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,63}))(?![\w-]|\.\w)")
_HOST_PORT_RE = re.compile(r"(?:^|(?<=[\s(=@,\[\"']))([A-Za-z][A-Za-z0-9-]*):(\d{2,5})(?!\d)")
_LOCALHOST_RE = re.compile(r"(?<![\w.-])localhost(?![\w-])", re.IGNORECASE)
_WORD_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT_RE.split(name) if w]


def field_kind(name: str) -> str | None:
    """'secret' (any value), 'secret_shaped' (token-like values), 'host', or None, from a field or flag name."""
    words = _words(name)
    if any(w in _SECRET_ALWAYS or w.endswith(("password", "passwd", "secret")) for w in words):
        return "secret"
    if any(w in _SECRET_SHAPED or w.endswith(("apikey", "token")) for w in words):
        return "secret_shaped"
    if words and (words[-1] in _HOST_FIELDS or name.lower() in ("head_address", "node_name", "host_name")):
        return "host"
    return None


def _token_like(value: str) -> bool:
    """Shaped like a credential: one word, long, or shorter with a letter in it (`0.52` in `first token: 0.52`
    is a number, `hf_x` is not)."""
    if not value or any(c.isspace() for c in value):
        return False
    return len(value) >= 8 or (len(value) >= 4 and any(c.isalpha() for c in value))


def _is_placeholder_only(value: str) -> bool:
    return value in PLACEHOLDERS or value == ""


class Sanitizer:
    """Rewrites JSON values. `learn()` first, on everything to be published, then `value()` on each part."""

    def __init__(self, known_hosts: Iterable[str] = (), include_this_machine: bool = True) -> None:
        self._known: set[str] = set()
        for name in known_hosts:
            self._remember(name)
        if include_this_machine:
            for name in (socket.gethostname(), socket.getfqdn()):
                self._remember(name)
                self._remember(name.split(".", 1)[0])
        self._known_re: re.Pattern[str] | None = None

    # learning ---------------------------------------------------------------------------------------

    def _remember(self, name: str) -> None:
        # Only names that cannot be an ordinary word (a digit, hyphen or dot in them): a host field
        # holding "vllm" must not erase every "vllm" in the bundle.
        name = name.strip().strip("[]")
        if len(name) >= 3 and any(c in name for c in "-.0123456789") and not name.replace(".", "").isdigit() \
                and " " not in name and "/" not in name and name.lower() not in ("0.0.0.0", "::", "::1"):
            self._known.add(name)
            self._known_re = None

    def learn(self, obj: Any, kind: str | None = None) -> None:
        """Collect hostnames from host-named fields (`host`, `--host X`, ...), to scrub wherever they recur."""
        if isinstance(obj, dict):
            for k, v in obj.items():
                self.learn(v, field_kind(str(k)) or kind)
        elif isinstance(obj, list):
            flag_kind = None
            for item in obj:
                self.learn(item, flag_kind or kind)
                flag_kind = field_kind(item) if isinstance(item, str) and item.startswith("-") else None
        elif isinstance(obj, str) and kind == "host":
            value = obj.split("://", 1)[-1].split("/", 1)[0]
            self._remember(value.rsplit(":", 1)[0] if value.count(":") == 1 else value)

    # rewriting ---------------------------------------------------------------------------------------

    def value(self, obj: Any, kind: str | None = None) -> Any:
        """A sanitized copy of a JSON value; `kind` is the field kind the value sits under."""
        if isinstance(obj, dict):
            out: dict[str, Any] = {}
            for k, v in obj.items():
                key = self.text(str(k))
                while key in out:  # two keys that sanitize alike both survive
                    key += "~"
                out[key] = self.value(v, field_kind(str(k)) or kind)
            return out
        if isinstance(obj, list):
            items, flag_kind = [], None
            for item in obj:
                items.append(self.value(item, flag_kind or kind))
                flag_kind = field_kind(item) if isinstance(item, str) and item.startswith("-") else None
            return items
        if isinstance(obj, str):
            return self.field(obj, kind)
        return obj

    def field(self, value: str, kind: str | None) -> str:
        if kind == "secret" and value:
            return "<secret>"
        if kind == "secret_shaped" and _token_like(value):
            return "<secret>"
        cleaned = self.text(value)
        if kind == "host" and not _is_placeholder_only(cleaned):
            return "<host>"
        return cleaned

    def text(self, s: str) -> str:
        """Every private thing in free text replaced by its placeholder."""
        if not s:
            return s
        s = _BEARER_RE.sub("<secret>", s)
        s = _KEY_RE.sub("<secret>", s)
        s = _ASSIGN_RE.sub(_assignment, s)
        s = _FLAG_RE.sub(_assignment, s)
        s = _URL_RE.sub(_url, s)
        s = _EMAIL_RE.sub("<email>", s)
        s = _WIN_PATH_RE.sub("<path>", s)
        s = _HOME_PATH_RE.sub("<path>", s)
        s = _POSIX_PATH_RE.sub(_posix_path, s)
        s = _IPV6_RUN_RE.sub(_ipv6, s)
        s = _IPV4_RE.sub(_ipv4, s)
        s = _AWS_HOST_RE.sub("<host>", s)
        s = _FQDN_RE.sub(_fqdn, s)
        s = _LOCALHOST_RE.sub("<host>", s)
        s = _HOST_PORT_RE.sub(r"<host>:\2", s)
        if self._known:
            if self._known_re is None:
                names = sorted(self._known, key=len, reverse=True)
                self._known_re = re.compile(r"(?<![\w.-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w-]|\.\w)",
                                            re.IGNORECASE)
            s = self._known_re.sub("<host>", s)
        return s


def _assignment(m: re.Match[str]) -> str:
    name, sep, value = m.group(1), m.group(2), m.group(3)
    if value.startswith("<") and value.rstrip("\"'").endswith(">"):
        return m.group(0)  # already a placeholder
    if field_kind(name) == "secret" or _token_like(value):
        return f"{name}{sep}<secret>"
    return m.group(0)


def _url(m: re.Match[str]) -> str:
    url = m.group(0)
    trimmed = url.rstrip(".,;:!?)]}")
    return "<url>" + url[len(trimmed):]


def _posix_path(m: re.Match[str]) -> str:
    path = m.group(0)
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] in API_ROUTE_ROOTS:
        return path
    if len(parts) >= 2 or parts[0].lower() in HOST_ROOTS:
        return "<path>"
    return path  # a single `/metrics` or `/completions` is a route, not a place on a disk


def _ipv4(m: re.Match[str]) -> str:
    if all(int(octet) <= 255 for octet in m.group(0).split(".")):
        return "<ip>"
    return m.group(0)


def _valid_ipv6(text: str) -> bool:
    if text.count(":") < 2:
        return False
    try:
        ipaddress.IPv6Address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _ipv6(m: re.Match[str]) -> str:
    """The longest valid IPv6 address inside a run of hex digits, colons and dots (`08:37:02` holds none).

    The run may carry neighbours (`english:2001:db8::1`, `2001:db8::1:` at a sentence end); an address
    glued to a letter (`std::vector`'s `d::`) is not one.
    """
    run, text = m.group(0), m.string
    before = text[m.start() - 1] if m.start() > 0 else ""
    after = text[m.end()] if m.end() < len(text) else ""

    def free(a: int, b: int) -> bool:
        return not (a == 0 and _is_word(before)) and not (b == len(run) and _is_word(after))

    starts = [0] + [i + 1 for i, c in enumerate(run) if c in ":." and i + 1 < len(run)]
    ends = [len(run)] + [i for i, c in enumerate(run) if c in ":." and i > 0]
    best: tuple[int, int] | None = None
    for a in starts:
        for b in ends:
            if b - a >= 2 and (best is None or b - a > best[1] - best[0]) and free(a, b) and _valid_ipv6(run[a:b]):
                best = (a, b)
    if best is None:
        return run
    return run[:best[0]] + "<ip>" + run[best[1]:]


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _fqdn(m: re.Match[str]) -> str:
    name, suffix = m.group(1), m.group(2).lower()
    if suffix not in HOST_SUFFIXES or name.lower() in PUBLIC_HOSTS:
        return name
    return "<host>"
