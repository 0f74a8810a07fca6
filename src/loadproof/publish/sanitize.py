"""The sanitizer: strips secrets, addresses, host names, URLs, e-mail addresses and host paths from run data.

It works on any JSON value: every string at any depth, dict keys included, is rewritten; what it removes
becomes a typed placeholder (PLACEHOLDERS). Numbers and booleans pass through untouched, except a number
under a secret-named field (`{"password": 12345678}`), so the numbers claims are computed from cannot move.

Secrets go by where they sit, not by their shape: under a secret-named field, flag, header or env pair
the whole value goes, whatever it looks like (spaces, newlines, a leading `-`, a number, a list, a dict).

- Secret-named: a name is split into words on `_`, `-`, `.`, spaces and camelCase (`X-Api-Key`,
  `apiKey`, `env.VLLM_API_KEY`, trailing digits dropped: `key2`). It is secret-named if a word is one of
  SECRET_WORDS (password, passwd, pass, pw, pwd, passphrase, secret, auth, authorization, credential,
  cookie, signature, bearer, jwt, otp, sessionid, ...) or ends like one (`dbpassword`, `oauth`,
  `xapikey`); or if a word is `token`/`key` (or ends in `token`: `hftoken`). A name whose last word is
  `error`/`exception`/`warning` (`KeyError`) names an error type, not a secret.
- Counts: `token` and `key` are ambiguous; `max_tokens` is a count, not a credential. A name whose only
  secret words are token(s)/key(s) is count-like when one of them is plural (`tokens`, `keys`), is not
  the last word (`first_token_ns`, `token_count`, `api_key_used`) or sits beside a count word
  (COUNT_WORDS: num, max, min, count, total, len, size, limit, budget, per, ns, s, ...). Under a count-like
  name a number, a numeric string, a boolean or null stays; anything else goes. So every field the
  claims read stays (prompt_tokens, output_tokens, chunk `tokens`, kv_cache_tokens, max_num_batched_tokens,
  first_token_ns, ...), and `token`, `key`, `api_key`, `HF_TOKEN`, `private_key` lose any value.
  `session` alone is not a secret word (capacity sessions are what loadproof measures; `session_id`
  names a probe session); session cookies go with their `Cookie:` header, `sessionid`, `session_token`.
- Structure: a value under a secret-named dict key goes whole ("<secret>", lists and dicts included;
  booleans, null and empty values stay). In a list, the item after a secret-named flag (`--api-key`)
  goes whole, even if it starts with `-`, unless it is itself a secret-named `--flag`; after curl's
  `-u`/`--user` too; a two-item `[name, value]` list with a secret-named name loses its value.
  A `{"name"|"key": SECRET_NAME, "value": X}` pair (Kubernetes env lists) loses X.
- Free text (a linear scanner, `_scan`): `NAME=VALUE`, `NAME: VALUE`, `"NAME": VALUE`, `--NAME VALUE`,
  `--NAME=VALUE`, `"--NAME", "VALUE"`, with NAME secret-named. A quoted value goes to its closing quote
  (`'...'`, `"..."`, `\\"...\\"` escaped once or more, escaped quotes inside skipped); an unquoted value
  after `NAME:` goes to the end of the line (headers: `Authorization: Token x`, `Cookie: a=b`, any
  scheme), after `NAME = ` (spaced, INI style) to the end of the line, after `"NAME":` to the end of the
  JSON scalar, after `NAME=` or a flag to the end of the argument. `Bearer X`, `Basic <base64 user:pass>`
  and `curl -u user:pass` / `--user` lose their credential; a PEM `-----BEGIN ... PRIVATE KEY-----` block
  goes whole; a `"name": "SECRET_NAME", ... "value": X` pair in JSON text loses X. A bare `token:` or
  `key:` in prose (`first token: 0.52 s`) loses what follows: better a lost figure in a note than a key.
  Known key shapes (sk-, hf_, ghp_, xoxb-, nvapi-, AKIA..., JWTs) are removed wherever they are, as a
  second net.

Placeholders:

    <secret>  the values above
    <url>     scheme://anything                       https://gpu7.corp:8000/v1, file:///srv/x
    <email>   local@domain                            ops@example.com, root@gpu-node-7
    <ip>      IPv4 and IPv6 addresses, loopback too   127.0.0.1, 10.0.0.5:8000, ::1, fe80::1%eth0
    <host>    values of host-named fields and flags   (host, hostname, node, upstream, instance, --host X,
              host=X); dotted names (below); name:port, localhost, ip-10-0-0-5; and every host name
              learned from the run and this machine, wherever it recurs as a whole word
    <path>    absolute host paths                     /home/alice/x, /root, /tmp/y, ~/models, C:\\Users\\x

Host names are learned (`learn`, on everything before it is rewritten) from host-named fields and flags,
the hosts of URLs, `host=X` in text, and this machine (hostname, FQDN, aliases, addresses); a dotted
name also teaches its first label (`gpu7.acme.lab` teaches `gpu7`). Plain words are learned too (`dgx`),
except STOP_HOSTS: words loadproof itself uses (vllm, localhost, server, capacity, english, ...), whose
removal would say nothing private and would rename claims. Learned names are replaced as whole words
(not inside a longer run of letters, digits and `_`), case-insensitively.

A dotted name of three labels or more (`a.b.c`, letters in the last label) is a host unless its last
label is a file extension (FILE_EXTENSIONS: `kv_cache_utils.py`), its first label is a module or a
loadproof word (CODE_PREFIXES: `vllm.entrypoints.openai`, `torch.cuda.x`, `capacity.criteria.running`), a
label is camelCase (`torch.cuda.OutOfMemoryError`) or it is a public host (PUBLIC_HOSTS): so
`gpu7.acme.lab` goes, whatever its suffix. A two-label name (`a.b`) needs a known suffix as well
(HOST_SUFFIXES: `example.com`, `node7.internal`): `gsm8k-test-0003.plain`, an item id and its mode in
every quality run, is shaped exactly like `node7.mycompany`, which therefore stays unless learned.

Left alone on purpose: model names (`meta-llama/Llama-3.1-8B`, `embedded:gemma3-270m`), versions
(`0.32.0`), metric names (`vllm:num_requests_running`), claim names, relative paths, API routes
(`/v1/models`), file names, git hashes, cache salts, image digests (`vllm/vllm-openai@sha256:...`).

Every pattern is linear in its input: each regex either starts only at the beginning of a run of its
characters (a lookbehind) and scans that run once (possessive quantifiers), or is bounded in length;
the scanner moves forward only. tests/unit/publish/test_sanitize_linear.py times it on adversarial input.

What was removed is remembered (`known_secrets`, `known_hosts`) so that publish can refuse a bundle in
which any of it still appears (publish.leaks).
"""

from __future__ import annotations

import base64
import binascii
import functools
import ipaddress
import re
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

PLACEHOLDERS = ("<url>", "<email>", "<secret>", "<ip>", "<host>", "<path>")
SECRET = "<secret>"
HOST = "<host>"

SECRET_WORDS = frozenset("""password passwd passphrase pass pw pwd secret secrets credential credentials cred creds
    cookie cookies authorization auth authn authz oauth apikey bearer jwt signature sig otp totp privatekey
    sessionid sessiontoken sessionkey csrf xsrf hmac""".split())
SECRET_SUFFIXES = ("password", "passwd", "passphrase", "secret", "apikey", "credential", "credentials", "cookie",
                   "privatekey", "auth")
AMBIGUOUS_WORDS = frozenset({"token", "tokens", "key", "keys"})
COUNT_WORDS = frozenset("""num n max min count counts total len length size limit budget per rate ratio pct perc
    percent avg mean median ns us ms s sec secs seconds usage id ids index idx first last""".split())
NOT_SECRET_LAST = frozenset({"error", "errors", "exception", "warning"})
HOST_FIELDS = frozenset({"host", "hostname", "hostnames", "hosts", "node", "nodename", "server", "upstream",
                         "fqdn", "machine", "instance", "ip", "addr", "address"})
HOST_NAMES = frozenset({"head_address", "node_name", "host_name", "master_addr", "master_address"})
AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "negotiate", "ntlm", "apikey", "key"})

# Public hosts a reader needs to see (where an image or a model came from); never private endpoints.
PUBLIC_HOSTS = frozenset({"docker.io", "ghcr.io", "nvcr.io", "quay.io", "huggingface.co", "github.com", "pypi.org",
                          "registry.k8s.io", "gcr.io", "pytorch.org", "download.pytorch.org", "files.pythonhosted.org"})
# Words never learned as host names: loadproof's own vocabulary and words that name nothing private.
STOP_HOSTS = frozenset("""localhost localdomain local none null true false auto any all default unknown example test
    host server node head worker master main primary leader router proxy relay gateway api app web www backend
    frontend service svc inference serve serving engine model models llm gpu gpus cpu cluster internal
    vllm sglang tgi triton trtllm ollama ray openai nvidia cuda torch python loadproof docker podman kubernetes
    throughput capacity prefill interference soak quality telemetry ab compare english chinese code completions
    chat metrics health embedded sim simulator url email secret ip path key token bearer basic digest""".split())
FILE_EXTENSIONS = frozenset("""py pyc pyi md rst txt json jsonl ndjson html htm css js mjs ts tsx jsx yaml yml toml
    ini cfg conf config csv tsv log out err sh bash zsh fish ps1 bat cmd c h cc cpp cxx hpp cu cuh rs go java kt
    rb pl php lua r so dll dylib a o lib bin pt pth safetensors gguf ggml onnx npz npy pkl pickle parquet arrow
    tar gz tgz bz2 xz zst zip whl egg lock sum mod png jpg jpeg gif svg webp pdf ipynb md5 sha256 env tmp bak
    pid sock jinja j2 tmpl tpl proto pb service socket timer mount target spec patch diff sql db sqlite""".split())
# Suffixes that make a two-label name (`a.b`) a host; three labels or more need none (module docstring).
# Real TLDs that are also common file extensions (py, md, sh, rs, pl, so, zip, ...) are left out on purpose.
HOST_SUFFIXES = frozenset("""
    com net org edu gov mil int info biz io ai co dev app cloud tech xyz online site top me tv cc
    us uk de fr nl eu ch at be se no fi dk es pt ie it cz sk ro hu gr il in jp cn kr tw hk sg au nz ca
    br mx ar ru ua tr za
    local lan internal intranet corp home localdomain localhost private cluster example test invalid arpa lab
""".split())
# First labels of dotted names that are code or loadproof's own names, not hosts.
CODE_PREFIXES = frozenset("""self cls os sys re np torch vllm sglang asyncio aiohttp msgspec json typing loadproof
    transformers tokenizers ray triton uvicorn fastapi starlette pydantic http urllib socket ssl subprocess
    concurrent multiprocessing collections builtins math numpy pandas requests httpx grpc logging signal
    threading queue importlib pathlib functools itertools dataclasses enum abc contextlib io time datetime
    flashinfer xformers nccl cupy jax tensorflow tf huggingface_hub safetensors openai anthropic
    throughput capacity prefill interference soak quality telemetry ab engine usage criteria""".split())
# The first folders of absolute paths that name a host's file system even alone (`/root`, `/tmp`).
HOST_ROOTS = frozenset("""home root tmp work workspace mnt data opt srv var usr scratch nfs lustre gpfs users
    private etc proc sys dev run media models cache""".split())
API_ROUTE_ROOTS = frozenset({"v1", "v2"})  # `/v1/chat/completions` is an API route, not a host path
PAIR_NAME_KEYS = frozenset({"name", "key", "variable", "var", "header", "param", "parameter"})
PAIR_VALUE_KEYS = frozenset({"value", "val"})

_WORD_SPLIT_RE = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_NUMBER_RE = re.compile(r"[+-]?\d[\d,_]*+(?:\.\d++)?+(?:[eE][+-]?\d++)?+")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+")
_CANONICAL_FLAG_RE = re.compile(r"--[a-z][a-z0-9]*+(?:[-_][a-z0-9]++)*+")
_HOSTISH_RE = re.compile(r"\[?([A-Za-z0-9][A-Za-z0-9.\-]*+)\]?(?::\d{1,5})?")

_KEY_PATTERNS = [
    r"(?<![A-Za-z0-9])sk-(?:proj-|ant-)?[A-Za-z0-9_-]{8,}+",  # OpenAI, Anthropic
    r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{8,}+",  # Hugging Face
    r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{16,}+", r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{16,}+",
    r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{16,}+", r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}+",
    r"(?<![A-Za-z0-9])nvapi-[A-Za-z0-9_-]{16,}+",
    r"(?<![A-Za-z0-9])AKIA[0-9A-Z]{16}", r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{30,}+",
    # a JWT: starts only where a run of its characters starts, so a failed try never rescans a run
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+",
]
_KEY_RE = re.compile("|".join(_KEY_PATTERNS))
_PEM_BEGIN_RE = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,12}-----")
_PEM_END_RE = re.compile(r"-----END [A-Z0-9 ]{0,60}-----")
# a candidate name, its closing quote and a separator; names start where a run of name characters starts
_CANDIDATE_RE = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_.\-]++)(?P<close>\\*+[\"'])?"
    r"(?P<sep>[ \t]*+(?:=>|=(?!=)|:(?![:/=]))[ \t]*+|[ \t]++|,[ \t]*+)")
_QUOTE_RE = re.compile(r"\\*+[\"']")
_WORD_END_RE = re.compile(r"(?:[^\s\"'`\\]|\\(?![\"']))*+")
_SCALAR_END_RE = re.compile(r"[^\s,;}\])\"'\\]*+")
_BLANKS_RE = re.compile(r"[ \t]++")
_BASIC_RE = re.compile(r"[A-Za-z0-9+/]{8,}+={0,2}")
# a text holding none of these has no secret-named or host-named name: the scanner is skipped
_PREFILTER = ("key", "token", "secret", "pass", "pw", "auth", "cookie", "cred", "sig", "bearer", "basic", "jwt", "otp",
              "csrf", "xsrf", "hmac", "session", "curl", "user", "host", "addr", "node", "server", "upstream", "fqdn",
              "machine", "instance", "ip", "name")

_URL_RE = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}+://[^\s\"'<>\\]*+")
_EMAIL_RE = re.compile(r"(?<![\w.%+-])[\w.%+-]++@(?!(?:sha\d+|md5):)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_WIN_PATH_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:[\\/][^\s\"'<>|]*+|\\\\[^\s\"'<>|\\]++\\[^\s\"'<>|]*+")
_HOME_PATH_RE = re.compile(r"(?<![\w/.])~[\w.-]*+(?:/[\w.@+%=~-]++)++/?")
_POSIX_PATH_RE = re.compile(r"(?<![\w.~/\\-])(?:/[\w.@+%=~-]++)++/?")
_IPV4_RE = re.compile(r"(?<!\d)(?<!\d\.)(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)")
# a run of hex digits, colons and dots holding two colons, from the start of the run: IPv6 candidates
_IPV6_RUN_RE = re.compile(r"(?<![0-9A-Fa-f:.])[0-9A-Fa-f.]*+:[0-9A-Fa-f.]*+:[0-9A-Fa-f:.]*+(?:%[A-Za-z0-9_.-]{1,32}+)?")
_HEX_GROUP_RE = re.compile(r"[0-9A-Fa-f]{1,4}")
_IPV4_TAIL_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?!\d)")
_AWS_HOST_RE = re.compile(r"(?<![\w-])ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?![\w])")
_FQDN_RE = re.compile(r"(?<![\w.-])((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,63}))(?![\w-]|\.\w)")
_HOST_PORT_RE = re.compile(r"(?:^|(?<=[\s(=@,\[\"']))([A-Za-z][A-Za-z0-9-]*+):(\d{2,5})(?!\d)")
_LOCALHOST_RE = re.compile(r"(?<![\w.-])localhost(?![\w-])", re.IGNORECASE)
_CAMEL_RE = re.compile(r"[a-z][A-Z]")
WORD_EDGE = "A-Za-z0-9_"  # a learned host name is replaced where it is not inside a run of these


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
        if any(words[i].endswith("s") for i in ambiguous) or ambiguous[-1] != len(words) - 1 \
                or any(w in COUNT_WORDS for w in words):
            return "count"
        return "secret"
    if words[-1] in HOST_FIELDS or name.lower().lstrip("-").replace("-", "_") in HOST_NAMES:
        return "host"
    return None


_cached_kind = functools.lru_cache(maxsize=8192)(_kind)


def is_count(value: Any) -> bool:
    """What may stay under a count-like name: a number, a numeric string, a boolean, null."""
    if value is None or isinstance(value, (bool, int, float)):
        return True
    return isinstance(value, str) and _NUMBER_RE.fullmatch(value.strip()) is not None


def _secret_flag(item: str) -> bool:
    """A real `--flag` with a secret-named name: the value after it, not a value itself."""
    return _CANONICAL_FLAG_RE.fullmatch(item) is not None and field_kind(item) in ("secret", "count")


def _basic_credential(value: str) -> bool:
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
            self.word = (start, _WORD_END_RE.match(self.s, start).end())  # type: ignore[union-attr]
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
        s, pos = self.s, 0
        while True:
            m = _CANDIDATE_RE.search(s, pos)
            if m is None:
                return self.spans
            pos = self.candidate(m)

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
                ident = _IDENTIFIER_RE.match(s, q.end() if q else start)
                if ident is not None and field_kind(ident.group()) in ("secret", "count"):
                    self.pair = field_kind(ident.group())
        if kind is None:
            return start
        q = _QUOTE_RE.match(s, start)
        if kind == "count":
            number = _NUMBER_RE.match(s, q.end() if q else start)
            if number is not None and self.value_ends(number.end(), q):
                return start  # a count: it stays, and what follows is scanned
            kind = "secret"
        if kind == "host":
            return self.host(start, q, style, sep)
        if kind == "basic":
            end = self.word_end(start)
            if q is not None or not _basic_credential(s[start:end]):
                return start
            kind = "secret"
        if q is not None:
            inner_start, inner_end, end = _quoted(s, q)
        else:
            inner_start = start
            if style == "line":
                end = _line_end(s, start)
            elif style == "scalar":
                end = _SCALAR_END_RE.match(s, start).end()  # type: ignore[union-attr]
            else:
                end = self.word_end(start)
            inner_end = end
        if inner_end <= inner_start:
            return start
        if inner_end - inner_start <= 8 and s[inner_start:inner_end] in PLACEHOLDERS:
            return end
        if q is None and style == "word":  # measured without copying the value: it may be long
            head = s[inner_start:inner_end].lower() if inner_end - inner_start <= 64 else ""
            if name.startswith("-") and not sep.strip() and _secret_flag(head):
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
                end = _SCALAR_END_RE.match(s, start, min(end, start + self.HOST_MAX)).end()  # type: ignore[union-attr]
            inner_end = end
        if inner_end - inner_start > self.HOST_MAX or inner_end <= inner_start:
            return start
        found = _HOSTISH_RE.fullmatch(s, inner_start, inner_end)
        if found is None or _is_address(found.group(1)) or _NUMBER_RE.fullmatch(found.group(1)) \
                or found.group(1).lower() in AUTH_SCHEMES or field_kind(found.group(1)) == "secret":
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
            flag = _CANONICAL_FLAG_RE.fullmatch(name) is not None
            if (field_kind(name) == "secret" and (flag or (sep.strip() and not name.startswith("-")))) \
                    or (name.lower() == "bearer" and not sep.strip()):
                return m.start()
            at = m.end()
        return None


def _scan(s: str) -> list[Span]:
    """Secret values (and host values) after secret-named (host-named) names in free text, in order."""
    return _Scanner(s).run()


def _pem_blocks(s: str) -> list[tuple[int, int]]:
    blocks = []
    pos = 0
    while True:
        begin = _PEM_BEGIN_RE.search(s, pos)
        if begin is None:
            return blocks
        end = _PEM_END_RE.search(s, begin.end())
        stop = end.end() if end is not None else len(s)
        blocks.append((begin.start(), stop))
        pos = stop


# the sanitizer -----------------------------------------------------------------------------------------


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


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _not_private_address(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


class Sanitizer:
    """Rewrites JSON values. `learn()` first, on everything to be published, then `value()` on each part."""

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
                if _IDENTIFIER_RE.fullmatch(value):
                    self.env_references.add(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self._secrets.setdefault(str(value), what)

    def _remember(self, name: str) -> None:
        name = name.strip().strip("[]").rstrip(".")
        if len(name) < 2 or not re.fullmatch(r"[A-Za-z0-9._:%\-]+", name) or _NUMBER_RE.fullmatch(name):
            return
        low = name.lower()
        if low in STOP_HOSTS or low in PUBLIC_HOSTS or _not_private_address(name) or name.strip(":") == "":
            return
        if name not in self._known:
            self._known.add(name)
            self._known_re = None
        if "." in name and not _is_address(name):
            self._remember(name.split(".", 1)[0])

    # learning ---------------------------------------------------------------------------------------

    def learn(self, obj: Any, kind: str | None = None) -> None:
        """Collect host names (host-named fields, `--host X`, URLs, `host=X`) and secret values, before rewriting."""
        if kind == "secret":
            self._secret(obj, "a value under a secret-named field")
            return
        if isinstance(obj, (dict, list)):
            for _, child, child_kind in _children(obj, kind):
                self.learn(child, child_kind)
        elif isinstance(obj, str):
            if kind == "count" and not is_count(obj):
                self._secret(obj, "a value under a secret-named field")
                return
            if kind == "host":
                value = obj.split("://", 1)[-1].split("/", 1)[0]
                self._remember(value.rsplit(":", 1)[0] if value.count(":") == 1 else value)
            self._learn_text(obj)

    def _learn_text(self, s: str) -> None:
        if "://" in s:
            for m in _URL_RE.finditer(s):
                host = m.group(0).split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
                self._remember(host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host)
        s, spans = self._spans(s)
        for span in spans:
            if span.kind == "host":
                self._remember(s[span.start:span.end])
            else:
                self._secret(s[span.start:span.end], "a value after a secret-named name in text")

    def _spans(self, s: str) -> tuple[str, list[Span]]:
        """`s` with its PEM private key blocks replaced, and the scanner's spans in that text."""
        if "-----BEGIN" in s:
            parts, last = [], 0
            for a, b in _pem_blocks(s):
                self._secret(s[a:b], "a PEM private key")
                parts += [s[last:a], SECRET]
                last = b
            s = "".join(parts) + s[last:]
        low = s.lower()
        return s, (_scan(s) if any(word in low for word in _PREFILTER) else [])

    # rewriting ---------------------------------------------------------------------------------------

    def value(self, obj: Any, kind: str | None = None) -> Any:
        """A sanitized copy of a JSON value; `kind` is the field kind the value sits under."""
        if kind == "secret":
            return self._redacted(obj)
        if isinstance(obj, dict):
            out: dict[str, Any] = {}
            for key, child, child_kind in _children(obj, kind):
                clean = self.text(str(key))
                while clean in out:  # two keys that sanitize alike both survive
                    clean += "~"
                out[clean] = self.value(child, child_kind)
            return out
        if isinstance(obj, list):
            return [self.value(child, child_kind) for _, child, child_kind in _children(obj, kind)]
        if isinstance(obj, str):
            return self.field(obj, kind)
        return obj

    def _redacted(self, obj: Any) -> Any:
        if obj is None or isinstance(obj, bool) or obj in ("", [], {}) or obj in PLACEHOLDERS:
            return obj
        self._secret(obj, "a value under a secret-named field")
        return SECRET

    def field(self, value: str, kind: str | None) -> str:
        if kind == "secret" or (kind == "count" and not is_count(value)):
            return self._redacted(value)
        cleaned = self.text(value)
        if kind == "host" and cleaned not in PLACEHOLDERS and cleaned != "":
            return HOST
        return cleaned

    def text(self, s: str) -> str:
        """Every private thing in free text replaced by its placeholder."""
        if not s:
            return s
        s, spans = self._spans(s)
        if spans:
            parts, last = [], 0
            for span in spans:
                parts.append(s[last:span.start])
                if span.kind == "secret":
                    self._secret(s[span.start:span.end], "a value after a secret-named name in text")
                    parts.append(SECRET)
                else:
                    parts.append(HOST)
                last = span.end
            s = "".join(parts) + s[last:]
        s = _KEY_RE.sub(self._shaped_key, s)
        # a Windows path before URLs: a URL stops at a backslash, and would take `C:` with it and
        # leave `:\Users\name\...` no longer shaped like a path (found by Hypothesis)
        s = _WIN_PATH_RE.sub("<path>", s)
        s = _URL_RE.sub(_url, s)
        s = _EMAIL_RE.sub("<email>", s)
        s = _HOME_PATH_RE.sub("<path>", s)
        s = _POSIX_PATH_RE.sub(_posix_path, s)
        if ":" in s:
            s = _IPV6_RUN_RE.sub(_ipv6, s)
        s = _IPV4_RE.sub(_ipv4, s)
        s = _AWS_HOST_RE.sub(HOST, s)
        s = _FQDN_RE.sub(_fqdn, s)
        s = _LOCALHOST_RE.sub(HOST, s)
        s = _HOST_PORT_RE.sub(r"<host>:\2", s)
        if self._known:
            if self._known_re is None:
                names = sorted(self._known, key=len, reverse=True)
                self._known_re = re.compile(rf"(?<![{WORD_EDGE}])(?:" + "|".join(map(re.escape, names))
                                            + rf")(?![{WORD_EDGE}])", re.IGNORECASE)
            s = self._known_re.sub(HOST, s)
        return s

    def _shaped_key(self, m: re.Match[str]) -> str:
        self._secret(m.group(0), "an API key or token by its shape")
        return SECRET


def _children(obj: dict[str, Any] | list[Any], kind: str | None) -> Iterator[tuple[Any, Any, str | None]]:
    """(key or index, child, the kind the child sits under) for a dict or a list (module docstring)."""
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
    if len(obj) == 2 and isinstance(obj[0], str) and not obj[0].startswith("-") \
            and field_kind(obj[0]) in ("secret", "count"):
        pending = field_kind(obj[0])  # a `[name, value]` header or variable pair
        yield 0, obj[0], kind
        yield 1, obj[1], pending
        return
    for i, item in enumerate(obj):
        if pending is not None and not (isinstance(item, str) and _secret_flag(item)):
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


def _ipv6_ends(run: str, a: int) -> list[int]:
    """Where an IPv6 address starting at `a` in `run` can end (each end at a `:`/`.` or the run's end).

    Groups of 1-4 hex digits, at most one `::`, eight groups without it and at most seven with it, an
    IPv4 tail counting as two. One pass over at most nine groups: bounded work per start.
    """
    n, ends = len(run), []
    i, groups, double = a, 0, False

    def end_at(e: int) -> None:
        if e == n or run[e] in ":.":
            ends.append(e)

    if run.startswith("::", a):
        double, i = True, a + 2
        end_at(i)
    elif run.startswith(":", a):
        return ends
    while i < n:
        group = _HEX_GROUP_RE.match(run, i)
        if group is None:
            break
        j = group.end()
        if j < n and run[j] == ".":  # an IPv4 tail
            v4 = _IPV4_TAIL_RE.match(run, i)
            if v4 is not None and all(int(o) <= 255 for o in v4.group().split(".")) \
                    and (groups + 2 <= 7 if double else groups == 6):
                end_at(v4.end())
            break
        if j < n and run[j] not in ":.":
            break  # five hex digits or more
        groups += 1
        if groups > (7 if double else 8):
            break
        if double or groups == 8:
            end_at(j)
        if run.startswith("::", j):
            if double:
                break
            double, i = True, j + 2
            end_at(i)
        elif run.startswith(":", j):
            i = j + 1
        else:
            break
    return ends


def _ipv6(m: re.Match[str]) -> str:
    """Every valid IPv6 address in a run of hex digits, colons and dots, left to right, longest first.

    An address may start at the run's start or after a `:` or `.` in it. The run may carry neighbours
    (`english:2001:db8::1`, `2001:db8::1:` at a sentence end); an address glued to a letter
    (`std::vector`'s `d::`) is not one.
    """
    run, text = m.group(0), m.string
    zone = ""
    if "%" in run:
        run, zone = run.split("%", 1)
        zone = "%" + zone
    glued_before = m.start() > 0 and _is_word(text[m.start() - 1])
    glued_after = not zone and m.end() < len(text) and _is_word(text[m.end()])
    out, last, a = [], 0, 0
    while a < len(run):
        if a > 0 or not glued_before:
            ends = [e for e in _ipv6_ends(run, a) if e - a >= 2 and (e < len(run) or not glued_after)]
            if ends:
                out += [run[last:a], "<ip>"]
                last = a = max(ends)
                continue
        nxt = min((i for i in (run.find(":", a), run.find(".", a)) if i >= 0), default=-1)
        if nxt < 0:
            break
        a = nxt + 1
    if not out:
        return m.group(0)
    if zone and last == len(run):
        zone = ""  # the zone belongs to the address just replaced
    return "".join(out) + run[last:] + zone


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _fqdn(m: re.Match[str]) -> str:
    name = m.group(1)
    labels = [label.lower() for label in name.split(".")]
    if labels[-1] in FILE_EXTENSIONS or labels[0] in CODE_PREFIXES or any(_CAMEL_RE.search(x) for x in name.split(".")):
        return name  # a file, code, a claim name
    if len(labels) == 2 and labels[-1] not in HOST_SUFFIXES:
        return name  # `gsm8k-test-0003.plain` (an item and its mode) is shaped like `node7.mycompany`
    if name.lower() in PUBLIC_HOSTS or any(name.lower().endswith("." + p) for p in PUBLIC_HOSTS):
        return name
    return HOST
