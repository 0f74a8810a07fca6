"""Private things recognised by their shape in free text, and the placeholders they become.

    <secret>  known key shapes (sk-, hf_, ghp_, xoxb-, nvapi-, AKIA..., JWTs) wherever they are; PEM
              private key blocks (`pem_blocks`); and whatever the names around it mark (publish.scanner)
    <url>     scheme://anything                       https://gpu7.corp:8000/v1, file:///srv/x
    <email>   local@domain                            ops@example.com, root@gpu-node-7
    <ip>      IPv4 and IPv6 addresses, loopback too   127.0.0.1, 10.0.0.5:8000, ::1, fe80::1%eth0
    <host>    dotted names (below); name:port, localhost, ip-10-0-0-5; and the host names the sanitizer
              learned, wherever they recur as a whole word
    <path>    absolute host paths                     /home/alice/x, /root, /tmp/y, ~/models, C:\\Users\\x
    <redacted> a value of a kind publish does not know, or that does not fit its declared kind

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
characters (a lookbehind) and scans that run once (possessive quantifiers), or is bounded in length.
Each starts with a literal or a character class and checks its lookbehind after that first character,
so the regex engine skips straight to the characters a match can start with (1 MB of text in about
0.3 s: docs/benchmarks.md); a pass whose marker (`://`, `@`, `ip-`, ...) is absent is skipped.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from typing import Any

from loadproof.catalog import SCENARIOS

REDACTED = "<redacted>"  # a value of a kind publish does not know, or that does not fit its declared kind
PLACEHOLDERS = ("<url>", "<email>", "<secret>", "<ip>", "<host>", "<path>", "<media>", REDACTED)
MEDIA = "<media>"  # an image or audio file inline (a data URL, a long base64 run): private content, never published
SECRET, HOST, URL, PATH, IP = "<secret>", "<host>", "<url>", "<path>", "<ip>"

# Public hosts a reader needs to see (where an image or a model came from); never private endpoints.
PUBLIC_HOSTS = frozenset(
    {
        "docker.io",
        "ghcr.io",
        "nvcr.io",
        "quay.io",
        "huggingface.co",
        "github.com",
        "pypi.org",
        "registry.k8s.io",
        "gcr.io",
        "pytorch.org",
        "download.pytorch.org",
        "files.pythonhosted.org",
    }
)
# Words never learned as host names: loadproof's own vocabulary (its scenarios' names among them, from the
# catalog) and words that name nothing private.
STOP_HOSTS = frozenset(SCENARIOS) | frozenset(
    """localhost localdomain local none null true false auto any all default
    unknown example test
    host server node head worker master main primary leader router proxy relay gateway api app web www backend
    frontend service svc inference serve serving engine model models llm gpu gpus cpu cluster internal
    vllm sglang tgi triton trtllm ollama ray openai nvidia cuda torch python loadproof docker podman kubernetes
    telemetry compare english chinese code completions
    chat metrics health embedded sim simulator url email secret ip path key token bearer basic digest""".split()
)
FILE_EXTENSIONS = frozenset(
    """py pyc pyi md rst txt json jsonl ndjson html htm css js mjs ts tsx jsx yaml yml toml
    ini cfg conf config csv tsv log out err sh bash zsh fish ps1 bat cmd c h cc cpp cxx hpp cu cuh rs go java kt
    rb pl php lua r so dll dylib a o lib bin pt pth safetensors gguf ggml onnx npz npy pkl pickle parquet arrow
    tar gz tgz bz2 xz zst zip whl egg lock sum mod png jpg jpeg gif svg webp pdf ipynb md5 sha256 env tmp bak
    pid sock jinja j2 tmpl tpl proto pb service socket timer mount target spec patch diff sql db sqlite""".split()
)
# Suffixes that make a two-label name (`a.b`) a host; three labels or more need none (module docstring).
# Real TLDs that are also common file extensions (py, md, sh, rs, pl, so, zip, ...) are left out on purpose.
HOST_SUFFIXES = frozenset(
    """
    com net org edu gov mil int info biz io ai co dev app cloud tech xyz online site top me tv cc
    us uk de fr nl eu ch at be se no fi dk es pt ie it cz sk ro hu gr il in jp cn kr tw hk sg au nz ca
    br mx ar ru ua tr za
    local lan internal intranet corp home localdomain localhost private cluster example test invalid arpa lab
""".split()
)
# First labels of dotted names that are code or loadproof's own names (claim names start with their
# scenario's), not hosts.
CODE_PREFIXES = frozenset(SCENARIOS) | frozenset(
    """self cls os sys re np torch vllm sglang asyncio aiohttp msgspec json
    typing loadproof
    transformers tokenizers ray triton uvicorn fastapi starlette pydantic http urllib socket ssl subprocess
    concurrent multiprocessing collections builtins math numpy pandas requests httpx grpc logging signal
    threading queue importlib pathlib functools itertools dataclasses enum abc contextlib io time datetime
    flashinfer xformers nccl cupy jax tensorflow tf huggingface_hub safetensors openai anthropic
    telemetry engine usage criteria""".split()
)
# The first folders of absolute paths that name a host's file system even alone (`/root`, `/tmp`).
HOST_ROOTS = frozenset(
    """home root tmp work workspace mnt data opt srv var usr scratch nfs lustre gpfs users
    private etc proc sys dev run media models cache""".split()
)
API_ROUTE_ROOTS = frozenset({"v1", "v2"})  # `/v1/chat/completions` is an API route, not a host path

_KEY_PATTERNS = [
    r"s(?<![A-Za-z0-9]s)k-(?:proj-|ant-)?[A-Za-z0-9_-]{8,}+",  # OpenAI, Anthropic
    r"h(?<![A-Za-z0-9]h)f_[A-Za-z0-9]{8,}+",  # Hugging Face
    r"g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{16,}+|ithub_pat_[A-Za-z0-9_]{16,}+|lpat-[A-Za-z0-9_-]{16,}+)",
    r"x(?<![A-Za-z0-9]x)ox[abprs]-[A-Za-z0-9-]{10,}+",
    r"n(?<![A-Za-z0-9]n)vapi-[A-Za-z0-9_-]{16,}+",
    r"A(?<![A-Za-z0-9]A)(?:KIA[0-9A-Z]{16}|Iza[0-9A-Za-z_-]{30,}+)",
    # a JWT: starts only where a run of its characters starts, so a failed try never rescans a run
    r"e(?<![A-Za-z0-9_-]e)yJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+",
]
_KEY_RE = re.compile("|".join(_KEY_PATTERNS))
_PEM_BEGIN_RE = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,12}-----")
_PEM_END_RE = re.compile(r"-----END [A-Z0-9 ]{0,60}-----")
# a data URL, or a base64 run longer than any key or hash (256 characters: 192 bytes): an engine's error that
# echoes a request's image or audio back
_MEDIA_RE = re.compile(r"data:[\w.+-]{1,40}/[\w.+-]{1,60};base64,[A-Za-z0-9+/=]*+|[A-Za-z0-9+/]{256,}+={0,2}")
_URL_RE = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}+://[^\s\"'<>\\]*+")
_EMAIL_RE = re.compile(r"(?<![\w.%+-])[\w.%+-]++@(?!(?:sha\d+|md5):)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_WIN_PATH_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:[\\/][^\s\"'<>|]*+|\\\\[^\s\"'<>|\\]++\\[^\s\"'<>|]*+")
_HOME_PATH_RE = re.compile(r"~(?<![\w/.]~)[\w.-]*+(?:/[\w.@+%=~-]++)++/?")
_POSIX_PATH_RE = re.compile(r"/(?<![\w.~/\\-]/)[\w.@+%=~-]++(?:/[\w.@+%=~-]++)*+/?")
_IPV4_RE = re.compile(r"\d(?<!\d\d)(?<!\d\.\d)\d{0,2}+\.\d{1,3}+\.\d{1,3}+\.\d{1,3}+(?!\.?\d)")
# a run of hex digits, colons and dots holding two colons, from the start of the run: IPv6 candidates
_IPV6_RUN_RE = re.compile(r"(?<![0-9A-Fa-f:.])[0-9A-Fa-f.]*+:[0-9A-Fa-f.]*+:[0-9A-Fa-f:.]*+(?:%[A-Za-z0-9_.-]{1,32}+)?")
_HEX_GROUP_RE = re.compile(r"[0-9A-Fa-f]{1,4}")
_IPV4_TAIL_RE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?!\d)")
_AWS_HOST_RE = re.compile(r"(?<![\w-])ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?![\w])")
_FQDN_RE = re.compile(
    r"(?<![\w.-])((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,63}))(?![\w-]|\.\w)"
)
_HOST_PORT_RE = re.compile(r"(?:^|(?<=[\s(=@,\[\"']))([A-Za-z][A-Za-z0-9-]*+):(\d{2,5})(?!\d)")
_LOCALHOST_RE = re.compile(r"(?<![\w.-])localhost(?![\w-])", re.IGNORECASE)
_CAMEL_RE = re.compile(r"[a-z][A-Z]")
# where a dotted name or a `name:port` can be: a mark inside a run of the characters its match starts after
_FQDN_MARK_RE = re.compile(r"\.[A-Za-z]{2}")
_FQDN_RUN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_PORT_MARK_RE = re.compile(r":\d\d")
_HOST_PORT_RUN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-"
WORD_EDGE = "A-Za-z0-9_"  # a learned host name is replaced where it is not inside a run of these


def pem_blocks(s: str) -> list[tuple[int, int]]:
    blocks: list[tuple[int, int]] = []
    pos = 0
    while True:
        begin = _PEM_BEGIN_RE.search(s, pos)
        if begin is None:
            return blocks
        end = _PEM_END_RE.search(s, begin.end())
        stop = end.end() if end is not None else len(s)
        blocks.append((begin.start(), stop))
        pos = stop


def is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True


def not_private_address(text: str) -> bool:
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _url(m: re.Match[str]) -> str:
    url = m.group(0)
    trimmed = url.rstrip(".,;:!?)]}")
    return "<url>" + url[len(trimmed) :]


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
            if (
                v4 is not None
                and all(int(o) <= 255 for o in v4.group().split("."))
                and (groups + 2 <= 7 if double else groups == 6)
            ):
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
    if "::" not in run and run.count(":") < 6:
        return run  # no room for an address: eight groups need seven colons (six and an IPv4 tail): `08:37:02`
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


def replace_shapes(s: str, on_key: Callable[[re.Match[str]], str]) -> str:
    """Every shape above in `s` replaced by its placeholder; `on_key` replaces a key shape (and remembers it)."""
    if "base64," in s or len(s) >= 256:  # media first: a base64 run holds slashes and key-like stretches
        s = _MEDIA_RE.sub(MEDIA, s)
    s = _KEY_RE.sub(on_key, s)
    # a Windows path before URLs: a URL stops at a backslash, and would take `C:` with it and
    # leave `:\\Users\\name\\...` no longer shaped like a path (found by Hypothesis)
    s = _on_lines(s, (":\\", ":/", "\\\\"), _WIN_PATH_RE, PATH)
    s = _on_lines(s, ("://",), _URL_RE, _url)
    s = _on_lines(s, ("@",), _EMAIL_RE, "<email>")
    s = _on_lines(s, ("~",), _HOME_PATH_RE, PATH)
    s = _on_lines(s, ("/",), _POSIX_PATH_RE, _posix_path)
    if ":" in s:
        s = _IPV6_RUN_RE.sub(_ipv6, s)
    if "." in s:
        s = _IPV4_RE.sub(_ipv4, s)
        s = _from_marks(s, _FQDN_MARK_RE, _FQDN_RUN_CHARS, _FQDN_RE, _fqdn)
    s = _on_lines(s, ("ip-",), _AWS_HOST_RE, HOST)
    if "localhost" in s.lower():
        s = _LOCALHOST_RE.sub(HOST, s)
    if ":" in s:
        s = _from_marks(s, _PORT_MARK_RE, _HOST_PORT_RUN_CHARS, _HOST_PORT_RE, _host_port)
    return s


def _from_marks(
    s: str, mark: re.Pattern[str], run_chars: str, pattern: re.Pattern[str], repl: Callable[[re.Match[str]], str]
) -> str:
    """`pattern.sub(repl, s)` for a pattern that matches only from the start of a run of `run_chars` holding
    a `mark` (a dot and two letters for a dotted name, a colon and two digits for `name:port`): the mark is
    found first (a literal: fast), then the run's start, walking back at most to where the last try ended."""
    parts: list[str] = []
    last = pos = 0
    while True:
        hit = mark.search(s, pos)
        if hit is None:
            return "".join(parts) + s[last:] if parts else s
        start = hit.start()
        while start > pos and s[start - 1] in run_chars:
            start -= 1
        m = None if start > 0 and s[start - 1] in run_chars else pattern.match(s, start)
        if m is not None:
            parts += [s[last : m.start()], repl(m)]
            last = pos = m.end()
        else:
            pos = hit.start() + 1


def _host_port(m: re.Match[str]) -> str:
    return f"{HOST}:{m.group(2)}"


def _on_lines(s: str, markers: tuple[str, ...], pattern: re.Pattern[str], repl: Any) -> str:
    """`pattern.sub(repl)` on the lines of `s` that hold one of `markers` (a match needs one), the rest untouched.

    No shape spans a line, and each pattern's lookbehind excludes a newline as it excludes the start of the
    text, so this is `pattern.sub(repl, s)`, on a tenth of a log's lines instead of all of them.
    """
    if not any(marker in s for marker in markers):
        return s
    if "\n" not in s:
        return pattern.sub(repl, s)
    starts = sorted({s.rfind("\n", 0, i) + 1 for marker in markers for i in _occurrences(s, marker)})
    parts, last = [], 0
    for start in starts:
        if start < last:
            continue
        end = s.find("\n", start)
        end = len(s) if end < 0 else end
        parts += [s[last:start], pattern.sub(repl, s[start:end])]
        last = end
    return "".join(parts) + s[last:]


def _occurrences(s: str, marker: str) -> Iterator[int]:
    """Where `marker` occurs in `s`, one per line (the search skips to the next line after a hit)."""
    i = s.find(marker)
    while i >= 0:
        yield i
        end = s.find("\n", i)
        if end < 0:
            return
        i = s.find(marker, end)


def url_hosts(s: str) -> list[str]:
    """The host part (`host`, `host:port`, `[v6]:port`) of every URL in `s`."""
    return (
        [
            m.group(0).split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
            for m in _URL_RE.finditer(s)
        ]
        if "://" in s
        else []
    )
