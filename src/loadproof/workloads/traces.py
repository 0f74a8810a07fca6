"""Timed request traces for `loadproof run replay`: readers, selection and prompts built from block hashes.

Formats (`--format`):

| format | file | a row |
|---|---|---|
| `mooncake` | JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids` (one per 512-token block) | Mooncake's FAST'25 traces |
| `bailian` | JSONL: `chat_id`, `parent_chat_id` (-1: a session's first), `timestamp` (s), `input_length`, `output_length`, `type`, `turn`, `hash_ids` (one per 16-token block) | Alibaba's Qwen-Bailian traces (to-B API calling, coder, thinking) |
| `azure` | CSV with a header: `TIMESTAMP` (a date and time), `ContextTokens`, `GeneratedTokens` | Azure's LLM inference traces |
| `csv` | CSV with a header: `timestamp` (seconds), `input`, `output` | anything else |
| `weka` | JSON (one trace) or JSONL (one a line): `id`, `block_size`, `requests` of `t` (s), `in`, `out`, `hash_ids`, and sub-agents with their own `requests` (read by `workloads.weka_trace`) | agentic coding sessions as kv-cache-tester and InferenceX publish them |
| `otel` | an agent's OpenTelemetry spans (OTLP JSON): read by `workloads.otel_trace`, not here | agent frameworks |

Timestamps must not decrease, and in the JSONL formats (`HASHED`: those whose rows carry hash ids) must not
be negative: a row that breaks either, lacks a field, or does
not parse (not valid UTF-8, not JSON, nested too deep to read: `workloads.rows`) is one error naming the
file, the row (1-based line) and the problem; `skip_bad_rows` skips such rows and counts them.

Prompts (`BlockPrompts`): a request of L tokens with hash ids h_1..h_m is the concatenation of blocks
B(h_1) .. B(h_m), each exactly `block_tokens` tokens, the last cut to what remains of L. B(h) is a pure
function of (h, the run's salt): a head line `<h> <salt>.` and filler from the haystack builder's
pre-tokenized pool at a start drawn from the hash id, padded to the exact count. Two requests that share
hash id h at the same position share exactly B(h) (its tokens), and, since the head names the hash id,
diverge within the first tokens of the first block they do not share. A last block shorter than
`block_tokens` is the same head and filler with a shorter pad, so it shares a prefix of B(h). Azure and
plain CSV rows have no hashes: every block of every request gets an id of its own (nothing is shared
beyond the engine's own template). Mooncake's lengths are in 512-token blocks, Bailian's in 16-token blocks;
`block_tokens` B scales every input length by B/512 (B/16; rounded up, which keeps the number of blocks), so a
trace of 100k-token prompts runs on a small engine with the same sharing structure. A Bailian row also names
its session (the root of its `parent_chat_id` chain, where that chain is in the file; else the row's own
chat), its `turn` and its `type`, kept on the row; the replay says how many sessions, turns and types it
sends (the claims do not yet split by them).

The expected prefix-cache hit rate (`metrics.replay.expected_hits`): requests in trace order with an unbounded cache;
a request's hit is its longest run of leading blocks that earlier requests carried whole, in tokens
(block_tokens each, at most its own text), summed over requests, over the tokens the engine is asked
to prefill (text + the engine's overhead). Standard library only; the builder is passed in.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from loadproof.errors import UsageError
from loadproof.workloads.rows import open_text, parse_json, utf8_problem
from loadproof.workloads.weka_trace import weka_calls

if TYPE_CHECKING:
    from loadproof.workloads.synthetic import SyntheticPrompts

TraceFormat = Literal["mooncake", "bailian", "weka", "azure", "csv", "otel"]
TRACE_FORMATS: tuple[TraceFormat, ...] = get_args(TraceFormat)
# the formats of timed rows read here; `otel` (a recorded agent's spans) is `workloads.otel_trace`'s
ROW_FORMATS: tuple[TraceFormat, ...] = ("mooncake", "bailian", "weka", "azure", "csv")
MOONCAKE_BLOCK = 512  # tokens per hash id in Mooncake's traces
# the formats whose rows carry hash ids: tokens per id (weka: the published traces'; each file states its own)
HASHED = {"mooncake": MOONCAKE_BLOCK, "bailian": 16, "weka": 64}
# tokens per hash id as replayed by default: Mooncake's own; Bailian's doubled (a block's text opens with a head
# line naming its hash id and the run's salt, which with the shortest pad takes more than 16 tokens)
REPLAY_BLOCK = {"mooncake": MOONCAKE_BLOCK, "bailian": 32, "weka": 64}


class TraceError(UsageError):
    """A trace that cannot be replayed as asked: one line naming the file, the row and the problem."""


@dataclass(slots=True)
class TraceRow:
    line: int  # 1-based line of the file
    t_s: float  # seconds from the trace's origin
    input_tokens: int
    output_tokens: int
    hash_ids: list[int] | None = None  # Mooncake's, Bailian's; None: no sharing known
    trace_block: int = MOONCAKE_BLOCK  # tokens per hash id in the trace (HASHED)
    session: str | None = None  # Bailian: the session's first chat_id (the root of the parent chain)
    turn: int | None = None  # Bailian: the turn within the session (1 is the first)
    kind: str | None = None  # Bailian: the request's type (text, search, image, file, ...)


@dataclass
class TraceRead:
    rows: list[TraceRow]
    path: str
    format: str
    sha256: str
    lines: int = 0  # data rows read (before the offset and the limit)
    bad_rows: int = 0
    first_bad: str = ""
    before_offset: int = 0  # rows skipped by --start-offset-s
    origin_s: float = 0.0  # the first row's timestamp (the offset counts from it)


def _hashed(path: Path, fmt: str) -> Iterator[tuple[int, TraceRow | str]]:
    """Mooncake's or Bailian's JSONL: a row's lengths, hash ids (HASHED[fmt] tokens each) and, for Bailian,
    its session, turn and type."""
    block = HASHED[fmt]
    bailian = fmt == "bailian"
    fields = ("timestamp", "input_length", "output_length", "hash_ids") + (
        ("chat_id", "parent_chat_id") if bailian else ()
    )
    roots: dict[int, int] = {}  # Bailian: chat_id -> its session's first chat_id
    with open_text(path) as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            value, problem = parse_json(line)
            if problem is not None:
                yield line_no, problem
                continue
            if not isinstance(value, dict):
                yield line_no, "not a JSON object"
                continue
            missing = [k for k in fields if k not in value]
            if missing:
                yield line_no, f"no {', '.join(missing)}"
                continue
            t, inp, out, ids = value["timestamp"], value["input_length"], value["output_length"], value["hash_ids"]
            problem = _number("timestamp", t) or _count("input_length", inp) or _count("output_length", out, 0)
            if bailian:
                problem = (
                    problem
                    or _count("chat_id", value["chat_id"], 0)
                    or _count("parent_chat_id", value["parent_chat_id"], -1)
                    or (_count("turn", value["turn"]) if "turn" in value else None)
                )
            if problem:
                yield line_no, problem
                continue
            if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
                yield line_no, "hash_ids is not a list of whole numbers"
                continue
            if len(ids) != math.ceil(inp / block):
                yield (
                    line_no,
                    (f"{len(ids)} hash_ids for input_length {inp} (blocks of {block} need {math.ceil(inp / block)})"),
                )
                continue
            row = TraceRow(line_no, float(t) / (1 if bailian else 1000), int(inp), int(out), list(ids), block)
            if bailian:
                chat: int = value["chat_id"]  # whole numbers both: _count checked them above
                parent: int = value["parent_chat_id"]
                roots[chat] = roots.get(parent, chat) if parent >= 0 else chat
                row.session, row.turn = str(roots[chat]), value.get("turn")
                kind = value.get("type")
                row.kind = kind if isinstance(kind, str) else None
            yield line_no, row


def _weka(path: Path) -> Iterator[tuple[int, TraceRow | str]]:
    """kv-cache-tester's agentic coding traces (`workloads.weka_trace`), each call a row with its session."""
    for line_no, call in weka_calls(path):
        if isinstance(call, str):
            yield line_no, call
            continue
        row = TraceRow(call.line, call.t_s, call.input_tokens, call.output_tokens, call.hash_ids, call.trace_block)
        row.session, row.turn, row.kind = call.session, call.turn, call.kind
        yield line_no, row


def _csv(path: Path, columns: tuple[str, str, str], azure: bool) -> Iterator[tuple[int, TraceRow | str]]:
    with open_text(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise TraceError(f"{path}: empty: no header")
        bad = utf8_problem(",".join(header))
        if bad is not None:
            raise TraceError(f"{path}: line 1: the header is {bad}")
        names = [h.strip() for h in header]
        lower = [h.lower() for h in names]
        index = []
        for col in columns:
            if col.lower() not in lower:
                raise TraceError(f"{path}: line 1: no column {col!r} (its columns: {', '.join(names)})")
            index.append(lower.index(col.lower()))
        for line_no, cells in enumerate(reader, 2):
            if not cells or not any(c.strip() for c in cells):
                continue
            bad = utf8_problem(",".join(cells))
            if bad is not None:
                yield line_no, bad
                continue
            if len(cells) < len(names):
                yield line_no, f"{len(cells)} fields, the header has {len(names)}"
                continue
            t_text, inp_text, out_text = (cells[i].strip() for i in index)
            t = _timestamp(t_text) if azure else _float(t_text)
            if t is None:
                yield line_no, f"{columns[0]} {t_text!r} is not a {'date and time' if azure else 'number of seconds'}"
                continue
            inp, out = _int(inp_text), _int(out_text)
            if inp is None or inp < 1:
                yield line_no, f"{columns[1]} {inp_text!r} is not a whole number >= 1"
                continue
            if out is None or out < 0:
                yield line_no, f"{columns[2]} {out_text!r} is not a whole number >= 0"
                continue
            yield line_no, TraceRow(line_no, t, inp, out)


def _number(name: str, value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"{name} is not a number ({value!r})"
    return None


def _count(name: str, value: Any, least: int = 1) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        return f"{name} is not a whole number >= {least} ({value!r})"
    return None


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: str) -> int | None:
    value = _float(text)
    return int(value) if value is not None and value == int(value) else None


def _timestamp(text: str) -> float | None:
    """Azure's `2023-11-16 18:15:46.6805900` (seven fractional digits) -> seconds since the epoch (UTC)."""
    number = _float(text)
    if number is not None:
        return number
    head, dot, frac = text.partition(".")
    try:
        stamp = dt.datetime.fromisoformat(head + (("." + frac[:6].ljust(6, "0")) if dot else ""))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


def read_trace(
    path_text: str,
    fmt: str,
    *,
    start_offset_s: float = 0.0,
    max_requests: int | None = None,
    skip_bad_rows: bool = False,
) -> TraceRead:
    """The trace's rows from `start_offset_s` after its first timestamp, at most `max_requests` of them."""
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise TraceError(f"--trace {path_text}: no such file")
    if fmt not in ROW_FORMATS:
        why = (
            "a recorded agent's spans, which run replay takes" if fmt == "otel" else f"takes {', '.join(TRACE_FORMATS)}"
        )
        raise TraceError(f"--format {fmt}: not a trace of timed rows ({why})")
    if fmt == "weka":
        rows: Iterator[tuple[int, TraceRow | str]] = _weka(path)
    elif fmt in HASHED:
        rows = _hashed(path, fmt)
    elif fmt == "azure":
        rows = _csv(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"), azure=True)
    else:
        rows = _csv(path, ("timestamp", "input", "output"), azure=False)
    out = TraceRead([], str(path_text), fmt, _sha256(path))
    last: float | None = None
    origin: float | None = None
    for line_no, row in rows:
        out.lines += 1
        if isinstance(row, str):
            problem: str | None = row
        elif fmt in HASHED and row.t_s < 0:
            problem = f"negative timestamp {row.t_s * (1000 if fmt == 'mooncake' else 1):g}"
        elif last is not None and row.t_s < last:
            problem = f"timestamp goes back ({row.t_s:g} s after {last:g} s): the trace must be sorted by time"
        else:
            problem = None
        if problem is not None:
            where = f"{path_text}: line {line_no}"
            if not skip_bad_rows:
                raise TraceError(f"{where}: {problem} (--skip-bad-rows skips such rows, counting them)")
            out.bad_rows += 1
            out.first_bad = out.first_bad or f"{where}: {problem}"
            continue
        assert isinstance(row, TraceRow)
        last = row.t_s
        if origin is None:
            origin = out.origin_s = row.t_s
        if row.t_s - origin < start_offset_s:
            out.before_offset += 1
            continue
        out.rows.append(row)
        if max_requests is not None and len(out.rows) >= max_requests:
            break
    if not out.rows:
        raise TraceError(
            f"--trace {path_text}: no request to replay ({out.lines} rows read, {out.bad_rows} malformed, "
            f"{out.before_offset} before --start-offset-s {start_offset_s:g})"
        )
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Shaped:
    """One request as it will be sent: its text tokens, its block ids, its output tokens."""

    text_tokens: int
    blocks: list[Any]  # hash ids (Mooncake) or ids of the request's own
    output_tokens: int
    capped: bool  # the input was cut to --max-input-tokens or the context


def shape(
    rows: list[TraceRow],
    *,
    block_tokens: int,
    overhead_tokens: int,
    max_input_tokens: int | None,
    max_output_tokens: int | None,
    max_model_len: int | None,
    min_tail: int = 1,
) -> list[Shaped]:
    """Scale (hashed formats: B over the trace's tokens per hash id), cap and block each row. An input is capped to `max_input_tokens` (text and
    overhead together) and to the context less one output token; a last part block shorter than `min_tail`
    (a block's head and shortest pad) is raised to it, or, where that passes the cap, dropped; an output is
    capped to `max_output_tokens` and to what the context leaves; at least 1."""
    out: list[Shaped] = []
    for row in rows:
        if row.hash_ids is not None:
            tokens = math.ceil(row.input_tokens * block_tokens / row.trace_block)
        else:
            tokens = row.input_tokens
        total = tokens + overhead_tokens
        limit = min(max_input_tokens or math.inf, (max_model_len - 1) if max_model_len else math.inf)
        capped = total > limit
        if capped:
            tokens = max(1, int(limit) - overhead_tokens)
        rest = tokens % block_tokens
        if 0 < rest < min_tail:
            if tokens - rest + min_tail + overhead_tokens <= limit or tokens < block_tokens:
                tokens += min_tail - rest
            else:
                tokens -= rest
                capped = True
        n_blocks = math.ceil(tokens / block_tokens)
        if row.hash_ids is not None:
            blocks: list[Any] = list(row.hash_ids[:n_blocks])
        else:
            blocks = [f"r{row.line}.{j}" for j in range(n_blocks)]
        output = max(1, row.output_tokens)
        if max_output_tokens is not None:
            output = min(output, max_output_tokens)
        if max_model_len is not None:
            output = max(1, min(output, max_model_len - tokens - overhead_tokens))
        out.append(Shaped(tokens, blocks, output, capped))
    return out


@dataclass
class BlockPrompts:
    """Prompt texts built block by block from hash ids (see the module's docstring)."""

    synthetic: SyntheticPrompts  # its filler pool, pads and exact fill
    block_tokens: int
    salt: str
    seed: int
    _blocks: dict[Any, str] = field(default_factory=dict)

    def head(self, block: Any) -> str:
        return f"{block} {self.salt}.\n"

    def _start(self, block: Any) -> int:
        return random.Random(f"{self.seed}:block:{block}").randrange(self.synthetic._n)

    def block(self, block: Any, tokens: int | None = None) -> str:
        """Block `block`'s text, `tokens` long (default: whole)."""
        tokens = self.block_tokens if tokens is None else tokens
        whole = tokens == self.block_tokens
        if whole and block in self._blocks:
            return self._blocks[block]
        head = self.head(block)
        text = self.synthetic._fill(head, self.synthetic.builder.count(head), tokens, self._start(block))
        if text is None:
            raise UsageError(
                f"a block of {tokens} tokens is too short for its head line and a pad "
                f"({self.shortest_block()} at least): raise --block-tokens or --max-input-tokens"
            )
        if whole:
            self._blocks[block] = text
        return text

    def shortest_block(self) -> int:
        return self.synthetic.builder.count(self.head(10**6)) + self.synthetic.pad_min

    def prompt(self, text_tokens: int, blocks: list[Any]) -> str:
        full, rest = divmod(text_tokens, self.block_tokens)
        parts = [self.block(b) for b in blocks[:full]]
        if rest:
            parts.append(self.block(blocks[full], rest))
        return "".join(parts)
