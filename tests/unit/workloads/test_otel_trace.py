"""OTLP JSON agent traces: spans read by both conventions, the order calls wait for each other in (fork, join,
parallel sub-agents), message shapes without their text, and every bad file one line naming file, span and field."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from loadproof.workloads.otel_trace import read_otel_trace
from loadproof.workloads.traces import TraceError

MS = 1_000_000


def attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}  # OTLP/JSON writes 64-bit integers as strings
    return {"key": key, "value": {"stringValue": value}}


def span(sid: str, parent: str | None, start_ms: int, end_ms: int, op: str | None = None, **attrs: Any) -> dict:
    pairs = [attr("gen_ai.operation.name", op)] if op else []
    pairs += [attr(k.replace("__", "."), v) for k, v in attrs.items()]
    return {
        "traceId": "5b8aa5a2d2c872e8321cf37308d69df2",
        "spanId": sid,
        "parentSpanId": parent or "",
        "name": sid,
        "startTimeUnixNano": str(start_ms * MS),
        "endTimeUnixNano": end_ms * MS,
        "attributes": pairs,
    }


def otlp(*spans: dict) -> dict:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}


def chat(sid: str, parent: str, start: int, end: int, text: str = "hi", tokens: int = 10) -> dict:
    messages = json.dumps([{"role": "system", "parts": [{"type": "text", "content": "You help."}]},
                           {"role": "user", "parts": [{"type": "text", "content": text}]}])  # fmt: skip
    return span(sid, parent, start, end, "chat", gen_ai__request__model="m", gen_ai__usage__input_tokens=tokens,
                gen_ai__usage__output_tokens=5, gen_ai__input__messages=messages)  # fmt: skip


AGENT = [
    span("a0", None, 0, 100, "invoke_agent"),
    chat("c1", "a0", 0, 10, "plan the trip"),
    span("t1", "a0", 10, 15, "execute_tool"),
    span("s0", "a0", 15, 60, "invoke_agent"),  # a sub-agent: forks after t1, joined by c2
    chat("s1", "s0", 15, 30, "find flights"),
    chat("s2", "s0", 30, 60, "find flights"),
    chat("c2", "a0", 60, 80),
    span("p1", "a0", 80, 95, "invoke_agent"),  # two sub-agents at once
    chat("p1c", "p1", 80, 95),
    span("p2", "a0", 81, 98, "invoke_agent"),
    chat("p2c", "p2", 81, 98),
    chat("c3", "a0", 98, 100),
]


def write(tmp_path: Path, doc: Any, name: str = "trace.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_calls_tools_and_agents_and_the_order_they_wait_in(tmp_path):
    trace = read_otel_trace(write(tmp_path, otlp(*AGENT)))
    assert [s.span_id for s in trace.of_kind("llm")] == ["c1", "s1", "s2", "c2", "p1c", "p2c", "c3"]
    assert [s.span_id for s in trace.of_kind("tool")] == ["t1"] and trace.spans["t1"].duration_s == 0.005
    assert trace.roots == ["a0"]
    assert trace.waits_for("c1") == []
    assert trace.waits_for("s1") == ["c1", "t1"]  # the sub-agent forks after the parent's call and tool
    assert trace.waits_for("s2") == ["c1", "t1", "s1"]
    assert trace.waits_for("c2") == ["c1", "t1", "s0"]  # the parent joins the sub-agent (its whole subtree)
    assert trace.waits_for("p1c") == trace.waits_for("p2c") == ["c1", "t1", "s0", "c2"]  # neither waits for the other
    assert trace.waits_for("c3") == ["c1", "t1", "s0", "c2", "p1", "p2"]
    assert sorted(trace.subtree("s0")) == ["s0", "s1", "s2"]


def test_a_call_keeps_its_tokens_and_its_messages_shapes_not_their_text(tmp_path):
    trace = read_otel_trace(write(tmp_path, otlp(*AGENT)))
    s1, s2, c2 = trace.spans["s1"], trace.spans["s2"], trace.spans["c2"]
    assert (s1.model, s1.input_tokens, s1.output_tokens) == ("m", 10, 5)
    assert [m.role for m in s1.messages] == ["system", "user"] and s1.messages[1].chars == len("find flights")
    assert s1.messages == s2.messages and s1.messages[1] != c2.messages[1]  # shared where the text was the same
    assert "find flights" not in repr(trace)


def test_openinference_spans_read_as_the_genai_ones(tmp_path):
    oi = span("x", None, 0, 5, None, openinference__span__kind="LLM", llm__model_name="m2",
              llm__token_count__prompt=7, llm__token_count__completion=3)  # fmt: skip
    oi["attributes"] += [
        attr("llm.input_messages.0.message.role", "user"),
        attr("llm.input_messages.0.message.content", "hello"),
        attr("llm.tools.0.tool.json_schema", "{}"),
        attr("llm.tools.1.tool.json_schema", "{}"),
    ]
    tool = span("y", "x", 5, 6, None, openinference__span__kind="TOOL")
    trace = read_otel_trace(write(tmp_path, otlp(oi, tool)))
    x = trace.spans["x"]
    assert (x.kind, x.model, x.input_tokens, x.output_tokens, x.tools) == ("llm", "m2", 7, 3, 2)
    assert [(m.role, m.chars) for m in x.messages] == [("user", 5)] and trace.spans["y"].kind == "tool"


def test_a_collector_file_of_one_request_a_line_is_read_whole(tmp_path):
    lines = "\n".join(json.dumps(otlp(s)) for s in AGENT[:3]) + "\n"
    trace = read_otel_trace(write(tmp_path, lines, "trace.jsonl"))
    assert sorted(trace.spans) == ["a0", "c1", "t1"]


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ("not json at all\n", "line 1: not OTLP JSON"),
        ({"spans": []}, "not OTLP JSON: no resourceSpans list"),
        (otlp(), "not OTLP JSON spans: no span"),
        (otlp({"name": "n", "startTimeUnixNano": 1, "endTimeUnixNano": 2}), "a span (n) without its spanId"),
        (otlp({**chat("c", "", 0, 1), "startTimeUnixNano": None}), "span c (c): startTimeUnixNano missing"),
        (otlp({**chat("c", "", 0, 1), "startTimeUnixNano": "-5"}), "span c (c): startTimeUnixNano is negative"),
        (otlp(chat("c", "", 10, 5)), "span c (c): endTimeUnixNano 5000000 is before startTimeUnixNano 10000000"),
        (otlp(chat("c", "gone", 0, 1)), "span c (c): its parent gone is not in the file"),
        (otlp(chat("a", "b", 0, 1), chat("b", "a", 0, 1)), "form a cycle of parents"),
        (otlp(span("t", None, 0, 1, "execute_tool")), "no LLM span"),
        (
            otlp(span("c", None, 0, 1, "chat", gen_ai__usage__input_tokens="ten")),
            "gen_ai.usage.input_tokens is not a count",
        ),
        (otlp(chat("c", "", 0, 1), chat("c", "", 1, 2)), "span c: its spanId appears twice"),
    ],
)
def test_a_bad_trace_is_one_line_naming_the_file_span_and_field(tmp_path, doc, said):
    path = write(tmp_path, doc)
    with pytest.raises(TraceError) as caught:
        read_otel_trace(path)
    message = str(caught.value)
    assert said in message and message.startswith(path) and "\n" not in message


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        read_otel_trace(str(tmp_path / "none.json"))


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent-traces"


@pytest.mark.parametrize("name", ["agent-trace.genai.jsonl", "agent-trace.openinference.jsonl"])
def test_an_openai_agents_sdk_run_reads_as_its_calls_fork_and_join(name):
    """The SDK's own spans (tests/fixtures/README.md): the orchestrator's call, then the sub-agent's two calls
    (it forks after the orchestrator's first call, and its second call follows its tool), then the
    orchestrator's second call, which joins the sub-agent; both conventions give the same calls."""
    trace = read_otel_trace(str(FIXTURES / name))
    calls = trace.of_kind("llm")
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [(40, 62), (45, 43), (72, 48), (95, 48)]
    first, sub1, sub2, last = (c.span_id for c in calls)

    def before(span_id: str) -> set[str]:  # what must have ended: the spans waited for, with their subtrees
        return {s for w in trace.waits_for(span_id) for s in trace.subtree(w)}

    tools = {t.name.removeprefix("execute_tool "): t for t in trace.of_kind("tool")}
    assert (
        set(tools) == {"ask_stock_clerk", "lookup_inventory"}
        and round(tools["lookup_inventory"].duration_s, 3) == 0.253
    )
    assert before(first) == set() and first in before(sub1)  # the sub-agent forks after the first call
    assert {sub1, tools["lookup_inventory"].span_id} <= before(sub2)  # its second call follows its tool
    assert {sub1, sub2, tools["ask_stock_clerk"].span_id} <= before(last)  # the orchestrator joins the sub-agent
    assert last not in before(sub2) | before(sub1)
    # the orchestrator's two calls open with the same system message, the sub-agent's two with its own
    assert calls[0].messages[0] == calls[3].messages[0] and calls[1].messages[:2] == calls[2].messages[:2]
    assert calls[0].messages[0] != calls[1].messages[0]


SHIPPED = files("loadproof") / "data" / "traces"


@pytest.mark.parametrize("convention", ["genai", "openinference"])
def test_the_shipped_agent_run_reads_as_two_sub_agents_at_once_forked_and_joined(convention):
    """The trace loadproof ships (loadproof/data/traces/README.md, recorded by scripts/record-agent-trace.py): the
    orchestrator's first call, then two stock clerks at once (each forks after that call; its second call follows
    its tool), then the orchestrator's last call, which joins both; both conventions give the same calls and
    tokens."""
    trace = read_otel_trace(str(SHIPPED / f"openai-agents-subagents.{convention}.jsonl"))
    calls = trace.of_kind("llm")
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [
        (561, 98), (380, 42), (380, 43), (407, 48), (407, 48), (667, 48),
    ]  # fmt: skip
    first, last = calls[0].span_id, calls[-1].span_id

    def before(span_id: str) -> set[str]:  # what must have ended: the spans waited for, with their subtrees
        return {s for w in trace.waits_for(span_id) for s in trace.subtree(w)}

    asks = [t for t in trace.of_kind("tool") if t.name.endswith("ask_stock_clerk")]
    lookups = [t for t in trace.of_kind("tool") if t.name.endswith("lookup_inventory")]
    assert len(asks) == len(lookups) == 2 and all(0.25 <= t.duration_s < 0.27 for t in lookups)
    clerks = [[c for c in calls if c.span_id in trace.subtree(a.span_id)] for a in asks]
    assert before(first) == set() and all(len(c) == 2 for c in clerks)
    for (one, two), (other, _), ask in zip(clerks, reversed(clerks), asks):
        assert first in before(one.span_id) and other.span_id not in before(one.span_id)  # a fork; the clerks at once
        (lookup,) = [t for t in lookups if t.span_id in trace.subtree(ask.span_id)]
        assert {one.span_id, lookup.span_id} <= before(two.span_id)  # its second call follows its tool
        assert {one.span_id, two.span_id, ask.span_id} <= before(last) and last not in before(two.span_id)  # the join
    # the orchestrator's two calls open with its instructions and the question; each clerk's with its own
    assert calls[0].messages[:2] == calls[-1].messages[:2] and calls[0].messages[0].chars == 2370
    assert all(c[0].messages[:2] == c[1].messages[:2] and c[0].messages[0].chars == 1641 for c in clerks)
    assert clerks[0][0].messages[0] == clerks[1][0].messages[0] != calls[0].messages[0]
