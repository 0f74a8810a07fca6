"""An agent's run as its framework recorded it: OpenTelemetry spans in OTLP JSON, read into LLM calls, tool calls
and agents, with the order they depend on each other in (issue #40, item 3; the replay that sends them is to come).

The file: one OTLP/JSON `ExportTraceServiceRequest` (`{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}`),
or several, one a line (what the OpenTelemetry Collector's file exporter writes). A span's ids are hex strings,
its times nanoseconds since the epoch (numbers or, as OTLP/JSON writes 64-bit integers, strings), its attributes
`{"key", "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue" | "arrayValue"}}`.

What a span is, by the two conventions agent frameworks emit:

| kind | GenAI semantic conventions | OpenInference |
|---|---|---|
| llm | `gen_ai.operation.name` chat, text_completion or generate_content | `openinference.span.kind` LLM |
| tool | `gen_ai.operation.name` execute_tool | `openinference.span.kind` TOOL |
| agent | `gen_ai.operation.name` invoke_agent or create_agent | `openinference.span.kind` AGENT |

An LLM call's model (`gen_ai.request.model`, `llm.model_name`), its tokens (`gen_ai.usage.input_tokens` and
`output_tokens`; `llm.token_count.prompt` and `completion`), its tools (`gen_ai.tool.definitions`;
`llm.tools.N.tool.json_schema`) and its input messages (`gen_ai.input.messages`, a JSON list of `{role, parts}`;
`llm.input_messages.N.message.role` and `.content`). A message's text is never kept: its role, its length in
characters and a digest, so a replay can write synthetic text of the same size that two calls share exactly
where the recorded ones did.

The order (`AgentTrace.waits_for`): a span waits for every sibling (a span of the same parent) that ended before
it started, and so does everything under it. A call waits for the calls before it in its agent; a sub-agent
that starts after its parent's call ended forks from that call; the parent's next call, starting after the
sub-agent ended, joins it; two sub-agents running at once wait for neither. A tool span's recorded duration is
the time its dependants wait beyond it.

A file that is not OTLP JSON, a span with no id or times, one that ends before it starts or has a negative time,
a parent that is not in the file, or a cycle of parents is one `TraceError` naming the file, the span and the
field. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from loadproof.workloads.traces import TraceError

SpanKind = Literal["llm", "tool", "agent", "other"]
GENAI_KINDS: dict[str, SpanKind] = {
    "chat": "llm",
    "text_completion": "llm",
    "generate_content": "llm",
    "execute_tool": "tool",
    "invoke_agent": "agent",
    "create_agent": "agent",
}
OPENINFERENCE_KINDS: dict[str, SpanKind] = {"LLM": "llm", "TOOL": "tool", "AGENT": "agent"}


@dataclass(frozen=True)
class MessageShape:
    """A recorded message without its text: who said it, how long it was, and a digest of what it said."""

    role: str
    chars: int
    digest: str


@dataclass
class Span:
    span_id: str
    trace_id: str
    parent_id: str | None
    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tools: int = 0  # tool definitions the call offered
    messages: tuple[MessageShape, ...] = ()
    children: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


@dataclass
class AgentTrace:
    path: str
    sha256: str
    spans: dict[str, Span]
    roots: list[str]

    def of_kind(self, kind: SpanKind) -> list[Span]:
        """The spans of one kind, in the order they started."""
        return sorted((s for s in self.spans.values() if s.kind == kind), key=lambda s: (s.start_ns, s.span_id))

    def waits_for(self, span_id: str) -> list[str]:
        """The spans that must end before `span_id` starts: each sibling, of it and of every span above it,
        that ended before that one started (their whole subtrees with them)."""
        out: list[str] = []
        node: Span | None = self.spans[span_id]
        while node is not None:
            siblings = self.spans[node.parent_id].children if node.parent_id else self.roots
            start = node.start_ns
            out += [s for s in siblings if s != node.span_id and self.spans[s].end_ns <= start]
            node = self.spans[node.parent_id] if node.parent_id else None
        return sorted(out, key=lambda s: (self.spans[s].end_ns, s))

    def subtree(self, span_id: str) -> list[str]:
        out, todo = [], [span_id]
        while todo:
            s = todo.pop()
            out.append(s)
            todo += self.spans[s].children
        return out


def read_otel_trace(path_text: str) -> AgentTrace:
    """Every span of the file, checked, linked to its parent and children."""
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise TraceError(f"--trace {path_text}: no such file")
    raw = path.read_bytes()
    spans: dict[str, Span] = {}
    for request in _requests(path_text, raw):
        for span in _spans(path_text, request):
            if span.span_id in spans:
                raise TraceError(f"{path_text}: span {span.span_id}: its spanId appears twice")
            spans[span.span_id] = span
    if not spans:
        raise TraceError(f"{path_text}: not OTLP JSON spans: no span in resourceSpans[].scopeSpans[].spans[]")
    roots = []
    for span in sorted(spans.values(), key=lambda s: (s.start_ns, s.span_id)):
        if span.parent_id is None:
            roots.append(span.span_id)
        elif span.parent_id not in spans:
            raise TraceError(
                f"{path_text}: span {span.span_id} ({span.name}): its parent {span.parent_id} is not in the file"
            )
        else:
            spans[span.parent_id].children.append(span.span_id)
    _no_cycle(path_text, spans)
    if not any(s.kind == "llm" for s in spans.values()):
        raise TraceError(
            f"{path_text}: no LLM span (gen_ai.operation.name chat, text_completion or generate_content; or "
            "openinference.span.kind LLM): nothing to replay"
        )
    return AgentTrace(str(path_text), hashlib.sha256(raw).hexdigest(), spans, roots)


def _requests(path_text: str, raw: bytes) -> list[dict[str, Any]]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path_text}: not OTLP JSON: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        whole = json.loads(text)
        docs = [whole]
    except json.JSONDecodeError:
        docs = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TraceError(f"{path_text}: line {n}: not OTLP JSON: {exc.msg}") from None
    for doc in docs:
        if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
            raise TraceError(f"{path_text}: not OTLP JSON: no resourceSpans list (an ExportTraceServiceRequest)")
    return docs


def _spans(path_text: str, request: dict[str, Any]) -> list[Span]:
    out = []
    for resource in request["resourceSpans"]:
        for scope in (resource or {}).get("scopeSpans") or []:
            for raw in (scope or {}).get("spans") or []:
                out.append(_span(path_text, raw))
    return out


def _span(path_text: str, raw: Any) -> Span:
    if not isinstance(raw, dict):
        raise TraceError(f"{path_text}: a span that is not an object")
    span_id = raw.get("spanId")
    if not isinstance(span_id, str) or not span_id:
        raise TraceError(f"{path_text}: a span ({raw.get('name', '?')}) without its spanId")
    where = f"{path_text}: span {span_id} ({raw.get('name', '?')})"
    start, end = _time(where, raw, "startTimeUnixNano"), _time(where, raw, "endTimeUnixNano")
    if end < start:
        raise TraceError(f"{where}: endTimeUnixNano {end} is before startTimeUnixNano {start}")
    attrs = _attributes(raw.get("attributes"))
    parent = raw.get("parentSpanId") or None
    return Span(
        span_id=span_id,
        trace_id=str(raw.get("traceId", "")),
        parent_id=str(parent) if parent else None,
        name=str(raw.get("name", "")),
        kind=_kind(attrs),
        start_ns=start,
        end_ns=end,
        model=_str(attrs, "gen_ai.request.model", "llm.model_name", "gen_ai.response.model"),
        input_tokens=_int(where, attrs, "gen_ai.usage.input_tokens", "llm.token_count.prompt"),
        output_tokens=_int(where, attrs, "gen_ai.usage.output_tokens", "llm.token_count.completion"),
        tools=_tools(attrs),
        messages=_messages(attrs),
    )


def _time(where: str, raw: dict[str, Any], key: str) -> int:
    value = raw.get(key)
    try:
        ns = int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        ns = None
    if ns is None:
        raise TraceError(f"{where}: {key} missing or not an integer ({value!r})")
    if ns < 0:
        raise TraceError(f"{where}: {key} is negative ({ns})")
    return ns


def _attributes(raw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _value(item.get("value"))
    return out


def _value(v: Any) -> Any:
    if not isinstance(v, dict):
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    return None


def _kind(attrs: dict[str, Any]) -> SpanKind:
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op in GENAI_KINDS:
        return GENAI_KINDS[op]
    oi = attrs.get("openinference.span.kind")
    if isinstance(oi, str) and oi.upper() in OPENINFERENCE_KINDS:
        return OPENINFERENCE_KINDS[oi.upper()]
    return "other"


def _str(attrs: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        if isinstance(attrs.get(key), str) and attrs[key]:
            return str(attrs[key])
    return None


def _int(where: str, attrs: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise TraceError(f"{where}: {key} is not a count of tokens ({value!r})")
        return int(value)
    return None


def _tools(attrs: dict[str, Any]) -> int:
    listed = attrs.get("gen_ai.tool.definitions")
    if isinstance(listed, str):
        try:
            decoded = json.loads(listed)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, list):
            return len(decoded)
    return len({k.split(".")[2] for k in attrs if k.startswith("llm.tools.") and k.count(".") >= 3})


def _messages(attrs: dict[str, Any]) -> tuple[MessageShape, ...]:
    listed = attrs.get("gen_ai.input.messages")
    if isinstance(listed, str):
        try:
            decoded = json.loads(listed)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, list):
            return tuple(_shape(str(m.get("role", "")), _parts_text(m)) for m in decoded if isinstance(m, dict))
    indexed: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith("llm.input_messages."):
            index, _, rest = key[len("llm.input_messages.") :].partition(".")
            if index.isdigit():
                indexed.setdefault(int(index), {})[rest] = value
    return tuple(
        _shape(str(m.get("message.role", "")), str(m.get("message.content", "") or ""))
        for _, m in sorted(indexed.items())
    )


def _parts_text(message: dict[str, Any]) -> str:
    parts = message.get("parts")
    if isinstance(parts, list):
        return "".join(str(p.get("content", "")) for p in parts if isinstance(p, dict))
    return str(message.get("content", "") or "")


def _shape(role: str, text: str) -> MessageShape:
    return MessageShape(role, len(text), hashlib.sha256(text.encode()).hexdigest()[:16])


def _no_cycle(path_text: str, spans: dict[str, Span]) -> None:
    """A span whose chain of parents comes back to itself never reaches a root."""
    done: set[str] = set()
    for start in spans:
        seen: list[str] = []
        node: str | None = start
        while node is not None and node not in done:
            if node in seen:
                loop = seen[seen.index(node) :] + [node]
                raise TraceError(f"{path_text}: spans {' -> '.join(loop)} form a cycle of parents")
            seen.append(node)
            node = spans[node].parent_id
        done.update(seen)
