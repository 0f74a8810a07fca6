"""Agentic coding traces in the kv-cache-tester format (`--format weka`): Claude Code sessions as WEKA's
kv-cache-tester (github.com/callanjfox/kv-cache-tester, Apache-2.0) and SemiAnalysis's InferenceX agent traces
publish them, and as AIPerf reads them (`aiperf/dataset/loader/weka_trace_models.py`).

A file holds one trace (a JSON object) or several (JSON Lines, one a line: InferenceX's `traces.jsonl`):

    {"id", "models", "block_size" (tokens a hash id, 64), "hash_id_scope" ("local" or "global"),
     "tool_tokens", "system_tokens",
     "requests": [{"t" (s from the trace's start), "type" "n" | "s", "model", "in", "out", "hash_ids",
                   "api_time", "think_time", "stop", ...},
                  {"t", "type" "subagent", "agent_id", "subagent_type", "requests": [the same, "t" from the
                   sub-agent's start]}, ...]}

Each API call becomes a `WekaCall`, which `workloads.traces` reads into a `TraceRow`: its time (a sub-agent's calls at the sub-agent's `t` plus
their own), its input and output tokens, its hash ids, its session (the trace's id; a sub-agent's calls
`<id>/<agent_id>`), its turn in that session (1 is the first) and its kind (`main` or the sub-agent's type). The
rows of every trace come in time order, each trace starting at 0 (the traces of a file replay together). A call's
`hash_ids` name its whole blocks (`in // block_size` of them, as the published traces have it, or one more for a
part block); a part block without an id gets one of its own, shared with nothing. Ids are renamed 0, 1, 2, ... as
they first appear (the replay writes each block's id into its text: a short one keeps the block short); under
`hash_id_scope` local a trace's ids are its own, so two traces share nothing, under global they are the file's.

The replay is open loop on these times (`scenarios.replay`): a sub-agent's fork and the parent's wait for it are
kept as the recorded times have them, not by waiting for the replayed calls. A malformed trace or call is one
problem naming the line and the call's place (`requests[16].requests[2]`) and field. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadproof.workloads.rows import open_text, parse_json


@dataclass(slots=True)
class WekaCall:
    """One API call: a trace row's fields (`workloads.traces.TraceRow`), its session, turn and kind filled."""

    line: int  # 1-based line of the file (a one-trace JSON file: 1)
    t_s: float  # seconds from its trace's start
    input_tokens: int
    output_tokens: int
    hash_ids: list[int]
    trace_block: int  # tokens per hash id: its trace's block_size
    session: str
    turn: int
    kind: str


def weka_calls(path: Path) -> Iterator[tuple[int, WekaCall | str]]:
    """(line, WekaCall) for every call of every trace in the file, in time order (every trace from 0); (line,
    problem) for a trace or call that cannot be read."""
    with open_text(path) as fh:
        text = fh.read()
    whole, problem = parse_json(text)
    docs: list[tuple[int, Any]] = [(1, whole)] if problem is None and isinstance(whole, dict) else []
    if not docs:  # JSON Lines (or a single line that is no trace: its problem, below)
        for line_no, line in enumerate(text.splitlines(), 1):
            if line.strip():
                value, problem = parse_json(line)
                docs.append((line_no, problem if problem is not None else value))
    rows: list[WekaCall] = []
    names = _Names()
    for k, (line_no, doc) in enumerate(docs):
        calls, problem = ([], doc) if isinstance(doc, str) else _trace_calls(doc, k, names)
        if problem is not None:
            yield line_no, problem
            continue
        for row in calls:
            row.line = line_no
        rows += calls
    for row in sorted(rows, key=lambda r: r.t_s):  # stable: a trace's calls at one time keep their order
        yield row.line, row


class _Names:
    """The file's block ids, renamed 0, 1, 2, ... as they first appear (a block's head line names its id, so the
    ids stay short): one name per (scope, recorded id), where a local-scope trace is a scope of its own and every
    global-scope trace shares one; a part block without a recorded id gets a name of its own."""

    def __init__(self) -> None:
        self.names: dict[tuple[object, int], int] = {}

    def of(self, scope: object, recorded: int) -> int:
        return self.names.setdefault((scope, recorded), len(self.names))

    def fresh(self) -> int:
        return self.of(object(), 0)


def _trace_calls(doc: Any, k: int, names: _Names) -> tuple[list[WekaCall], str | None]:
    """The trace's calls as rows (line 0: the caller's to set), or a problem naming the field."""
    if not isinstance(doc, dict):
        return [], "not a JSON object (a trace: id, block_size, requests)"
    missing = [f for f in ("id", "block_size", "requests") if f not in doc]
    if missing:
        return [], f"no {', '.join(missing)} (a trace: id, block_size, requests)"
    block, requests, scope = doc["block_size"], doc["requests"], doc.get("hash_id_scope", "local")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        return [], f"block_size is not a whole number >= 1 ({block!r})"
    if not isinstance(requests, list):
        return [], "requests is not a list"
    if scope not in ("local", "global"):
        return [], f"hash_id_scope is neither local nor global ({scope!r})"
    trace = _Trace(str(doc["id"]), block, k if scope == "local" else "global", names)
    for i, entry in enumerate(requests):
        problem = trace.entry(entry, f"requests[{i}]")
        if problem is not None:
            return [], problem
    if not trace.rows:
        return [], "no API call (type n or s) in requests"
    return trace.rows, None


class _Trace:
    """One trace's calls read into rows: its block, its ids' range, each session's turns so far."""

    def __init__(self, trace_id: str, block: int, scope: object, names: _Names) -> None:
        self.id, self.block, self.scope, self.names = trace_id, block, scope, names
        self.turns: dict[str, int] = {}
        self.rows: list[WekaCall] = []

    def entry(self, entry: Any, where: str) -> str | None:
        """A top-level entry: a call of the main agent, or a sub-agent and its calls."""
        if not (isinstance(entry, dict) and entry.get("type") == "subagent"):
            return self.call(entry, where, 0.0, self.id, "main")
        start, inner = entry.get("t"), entry.get("requests")
        bad = _time(start)
        if bad is not None:
            return f"{where}: t {bad}"
        if not isinstance(inner, list):
            return f"{where}: requests is not a list (a sub-agent's calls)"
        session = f"{self.id}/{entry.get('agent_id', where)}"
        kind = str(entry.get("subagent_type") or "subagent")
        for j, sub in enumerate(inner):
            problem = self.call(sub, f"{where}.requests[{j}]", float(start or 0), session, kind)
            if problem is not None:
                return problem
        return None

    def call(self, entry: Any, where: str, start_s: float, session: str, kind: str) -> str | None:
        if not isinstance(entry, dict):
            return f"{where}: not a JSON object"
        if entry.get("type") not in ("n", "s"):
            return f"{where}: type {entry.get('type')!r} is not n, s or subagent"
        missing = [f for f in ("t", "in", "out") if f not in entry]
        if missing:
            return f"{where}: no {', '.join(missing)}"
        t, inp, out, ids = entry["t"], entry["in"], entry["out"], entry.get("hash_ids", [])
        bad = _time(t)
        if bad is not None:
            return f"{where}: t {bad}"
        for name, value, least in (("in", inp, 1), ("out", out, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                return f"{where}: {name} is not a whole number >= {least} ({value!r})"
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
            return f"{where}: hash_ids is not a list of whole numbers >= 0"
        need = math.ceil(inp / self.block)
        if len(ids) not in (inp // self.block, need):
            return f"{where}: {len(ids)} hash_ids for in {inp} (blocks of {self.block}: {inp // self.block} whole, {need} in all)"
        self.turns[session] = self.turns.get(session, 0) + 1
        named = [self.names.of(self.scope, h) for h in ids] + [self.names.fresh() for _ in range(need - len(ids))]
        row = WekaCall(0, start_s + t, inp, out, named, self.block, session, self.turns[session], kind)
        self.rows.append(row)
        return None


def _time(value: Any) -> str | None:
    """None for a time in seconds >= 0; else what is wrong with it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"is not a number of seconds ({value!r})"
    return f"is negative ({value})" if value < 0 else None
