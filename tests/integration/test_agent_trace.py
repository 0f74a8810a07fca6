"""An openai-agents SDK agent run against the embedded engine, its spans recorded by both instrumentations
(scripts/record-agent-trace.py), then replayed by `run replay --format otel` against the same engine.

From the spans themselves: six chat calls (the orchestrator's, two stock clerks' two each, asked at once, and the
orchestrator's last), the function tool's recorded 0.25 s, the clerks forking after the orchestrator's first call
and its last call joining both, the same calls and tokens by the GenAI and the OpenInference conventions. From the
replay's records: one request per call and copy, each sent after the calls it waited for ended and the clerks at
once, the tool time kept as think time, and the prefix cache: requests whose recorded messages open alike share
their leading blocks in the plan (a copy shares only the instructions), and each request's cached prompt tokens,
as the engine reported them, at least the replay boundary of an ended request it continues (the embedded model
is hybrid: vLLM keeps its sliding-window blocks only at checkpoints) and at most what it shares with one sent
before it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.workloads.otel_trace import AgentTrace, Span, read_otel_trace
from tests.integration.test_long_context import run
from tests.polling import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

RECORDER = Path(__file__).resolve().parents[2] / "scripts" / "record-agent-trace.py"
TOOL_S = 0.25  # lookup_inventory's sleep in the recorder
THINK_MARGIN_S = 1.5  # how late a loaded 2-core machine may send a call after its think time
COPIES = 2


def ended_before(trace: AgentTrace, span_id: str) -> set[str]:
    """Every span that ended before `span_id` started and that it waits for, with the spans under them."""
    return {s for w in trace.waits_for(span_id) for s in trace.subtree(w)}


def agent_of(trace: AgentTrace, span: Span) -> str:
    """The name of the nearest agent span above (GenAI: `invoke_agent NAME`; OpenInference: `NAME`)."""
    node = trace.spans[span.parent_id] if span.parent_id else None
    while node is not None and node.kind != "agent":
        node = trace.spans[node.parent_id] if node.parent_id else None
    assert node is not None, span
    return node.name.removeprefix("invoke_agent ")


def tools_named(trace: AgentTrace, name: str) -> list[Span]:
    return [t for t in trace.of_kind("tool") if t.name.removeprefix("execute_tool ") == name]


def structure(trace: AgentTrace) -> dict[str, list[Span]]:
    """The orchestrator's calls and each clerk's (by the ask_stock_clerk call it runs under), checked: the clerks
    fork after the orchestrator's first call and run at once, a clerk's second call follows its tool, and the
    orchestrator's last call joins both."""
    calls = trace.of_kind("llm")
    assert len(calls) == 6, [c.name for c in calls]
    asks, lookups = tools_named(trace, "ask_stock_clerk"), tools_named(trace, "lookup_inventory")
    assert len(asks) == 2 and len(lookups) == 2
    assert all(TOOL_S <= t.duration_s < TOOL_S + 0.2 for t in lookups), [t.duration_s for t in lookups]
    first, last = [c for c in calls if agent_of(trace, c) == "orchestrator"]
    clerks = [[c for c in calls if c.span_id in trace.subtree(a.span_id)] for a in asks]
    assert all(len(c) == 2 and {agent_of(trace, x) for x in c} == {"stock_clerk"} for c in clerks)
    assert ended_before(trace, first.span_id) == set()
    for ask, (one, two), other in zip(asks, clerks, reversed(clerks)):
        assert first.span_id in ended_before(trace, one.span_id)  # the clerk forks after the orchestrator's call
        assert not {s.span_id for s in other} & ended_before(trace, one.span_id)  # the clerks run at once
        (lookup,) = [t for t in lookups if t.span_id in trace.subtree(ask.span_id)]
        assert {one.span_id, lookup.span_id} <= ended_before(trace, two.span_id)  # its second call follows its tool
    assert {c.span_id for clerk in clerks for c in clerk} <= ended_before(trace, last.span_id)  # the join
    # the instructions open every call of an agent; a clerk's two calls open with the same question
    assert len({c.messages[0] for c in calls}) == 2 and first.messages[0].chars > 2000
    assert all(c[0].messages[:2] == c[1].messages[:2] for c in clerks)
    tools = [[t for t in lookups if t.span_id in trace.subtree(a.span_id)] for a in asks]
    return {
        "orchestrator": [first, last],
        "clerk_a": clerks[0],
        "clerk_b": clerks[1],
        "tool_a": tools[0],
        "tool_b": tools[1],
    }


def common_blocks(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def common_messages(a: Span, b: Span, roles: set[str] | None = None) -> int:
    """How many messages the two calls open with alike (of these roles only, if given)."""
    n = 0
    for x, y in zip(a.messages, b.messages):
        if x != y or (roles is not None and x.role not in roles):
            break
        n += 1
    return n


def test_an_openai_agents_run_is_recorded_and_replayed_as_its_spans(engine, tmp_path: Path):
    recorded = subprocess.run(
        [sys.executable, "-W", "error", str(RECORDER), "--base-url", engine.url + "/v1", "--model", engine.model,
         "--out", str(tmp_path / "trace"), "--max-tokens", "16"],
        capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout[-2000:] + recorded.stderr[-4000:]
    genai = read_otel_trace(str(tmp_path / "trace" / "agent-trace.genai.jsonl"))
    openinference = read_otel_trace(str(tmp_path / "trace" / "agent-trace.openinference.jsonl"))
    shape = structure(genai)
    structure(openinference)
    tokens = [(c.input_tokens, c.output_tokens) for c in genai.of_kind("llm")]
    assert tokens == [(c.input_tokens, c.output_tokens) for c in openinference.of_kind("llm")]
    assert all(i and o for i, o in tokens)

    result, claims, run_dir = run(
        "replay", engine, tmp_path, "--endpoint", "chat", "--format", "otel",
        "--trace", str(tmp_path / "trace" / "agent-trace.genai.jsonl"), "--copies", str(COPIES),
        "--max-output-tokens", "8",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    plan = json.loads((run_dir / "manifest.json").read_text())["plan"]
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    calls = genai.of_kind("llm")
    n = len(calls)
    assert len(records) == n * COPIES and all(r["ok"] for r in records)
    assert claims["replay.agent.requests_replayed"]["value"] == n * COPIES
    by_index = {
        int(r["request_id"].split("-c")[1][:4]) * n + int(r["request_id"].rsplit("-", 1)[1]): r for r in records
    }
    assert sorted(by_index) == list(range(n * COPIES))
    assert plan["agent"]["spans"] == [c.span_id for c in calls] * COPIES  # request i replays span i mod n
    index = {c.span_id: i for i, c in enumerate(calls)}

    # every call sent after each call it waited for (by the spans, not the plan) ended; the clerks at once
    for copy in range(COPIES):
        at = {i: by_index[copy * n + i] for i in range(n)}
        for i, call in enumerate(calls):
            for dep in ended_before(genai, call.span_id) & set(index):
                assert at[i]["send_ns"] >= at[index[dep]]["end_ns"], (copy, call.name, dep)
        (a1, a2), (b1, b2) = ([at[index[c.span_id]] for c in shape[k]] for k in ("clerk_a", "clerk_b"))
        assert a1["send_ns"] < b1["end_ns"] and b1["send_ns"] < a1["end_ns"]  # two sub-agents at once
        # the tool's recorded time kept as think time between a clerk's two calls
        for one, two, (tool,) in ((a1, a2, shape["tool_a"]), (b1, b2, shape["tool_b"])):
            think_s = (two["send_ns"] - one["end_ns"]) / 1e9
            assert tool.duration_s <= think_s < tool.duration_s + THINK_MARGIN_S, (think_s, tool.duration_s)

    # prefix sharing: calls whose recorded messages open alike share their leading blocks in the plan; another
    # copy shares the leading system messages (the instructions) and nothing after them
    hashes, block = plan["hash_ids"], plan["block_tokens"]
    assert block == plan["kv_block_tokens"]  # the engine's KV block: the plan's blocks are the engine's
    for i, a in enumerate(calls):
        for j, b in enumerate(calls[:i]):
            shared = common_messages(a, b)
            system = common_messages(a, b, roles={"system"})
            same, other_copy = common_blocks(hashes[i], hashes[j]), common_blocks(hashes[n + i], hashes[j])
            assert (same > 0) == (shared > 0) and (other_copy > 0) == (system > 0), (i, j, same, other_copy)
            assert same >= other_copy if shared > system else same == other_copy, (i, j, same, other_copy)
    first, last = shape["orchestrator"]
    assert common_blocks(hashes[index[last.span_id]], hashes[index[first.span_id]]) >= len(hashes[0]) - 1
    # the engine's cached prompt tokens, request by request: at least the replay boundary of a request that ended
    # before it was sent and whose boundary its prompt shares, at most the blocks it shares with one sent before it
    # (and one block more: the template's tokens after a shared message may fill the block that message ends in).
    # Not every shared block: the embedded model (Gemma 3) is hybrid, and vLLM keeps its sliding-window blocks only
    # before each request's checkpoints (metrics/prefix_checkpoints.py), of which the replay boundary,
    # (prompt tokens - 1) // block blocks, is the one that holds whatever else ran at the same time
    prompts = {k: r["prompt_tokens"] for k, r in by_index.items()}

    def cached(k: int, j: int) -> int:
        """Tokens of k's prompt in whole blocks it shares with j (a prompt's last token is never a hit)."""
        return min(common_blocks(hashes[k], hashes[j]), (prompts[k] - 1) // block, prompts[j] // block) * block

    def resumed(k: int, j: int) -> int:
        """Tokens of k's prompt up to j's replay boundary, if k shares every block before it (else 0)."""
        boundary = (prompts[j] - 1) // block
        shares = common_blocks(hashes[k], hashes[j]) >= boundary and (prompts[k] - 1) // block >= boundary
        return boundary * block if shares else 0

    must = 0
    for k, record in by_index.items():
        low = max((resumed(k, j) for j in by_index if by_index[j]["end_ns"] <= record["send_ns"]), default=0)
        high = max((cached(k, j) for j in by_index if by_index[j]["send_ns"] < record["send_ns"]), default=0)
        assert low <= record["cached_tokens"] <= high + block, (k, low, record["cached_tokens"], high)
        must += low
    # over the replay: the engine's counters, the responses' cached tokens, and the expectation, computed here
    # from the plan's blocks (each request's hit: the most it shares with an earlier one), which they come near
    total = sum(prompts.values())
    hits = sum(r["cached_tokens"] for r in records)
    expected = sum(max((cached(k, j) for j in range(k)), default=0) for k in range(n * COPIES))
    value = {name: claims[f"replay.prefix_hit_rate.{name}_pct"]["value"] for name in ("engine", "expected")}
    assert value["expected"] == pytest.approx(100 * expected / total, abs=0.5) and expected > 0.5 * total
    assert value["engine"] == pytest.approx(100 * hits / total, abs=1)
    assert 100 * must / total <= value["engine"] <= value["expected"] + 0.5 and must > 0.3 * total, (
        value,
        100 * must / total,
    )
    # every prompt near its span's input tokens (a message's text as long as the recorded one)
    assert all(abs(prompts[k] - calls[k % n].input_tokens) <= 0.1 * calls[k % n].input_tokens for k in prompts)
    wait_until(
        lambda: engine.metric("vllm:num_requests_running") + engine.metric("vllm:num_requests_waiting") == 0,
        30,
        "the engine idle after the replay",
    )
