"""A recorded agent planned for replay (the shipped openai-agents trace, both conventions): one request per LLM
span of each copy, each copy's dependencies and waits, the session header, prompts counted whole, messages shared
where the trace shared them (a call that extends another keeps its prompt as a prefix; system messages across
copies, nothing else), and the replay's expected hits on the plan's block ids. The engine is faked: the
simulator's byte tokenizer and a template of `Role: content` lines stand in for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import loadproof.scenarios.agent_replay as module
from loadproof.metrics.replay import expected_hits
from loadproof.scenarios.base import Target
from loadproof.scenarios.long_context import HaystackTarget
from loadproof.scenarios.replay_cache import CacheSize
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.sim.text import tokenizer_path
from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.tokens import LocalTokens

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent-traces"
TRACES = [str(FIXTURES / "agent-trace.genai.jsonl"), str(FIXTURES / "agent-trace.openinference.jsonl")]
TOKENS = LocalTokens.load(tokenizer_path())


def render(messages: list[dict[str, Any]]) -> str:
    return "".join(f"{m['role'].capitalize()}: {m['content'] or ''}\n" for m in messages) + "Assistant:"


@pytest.fixture
def fake_engine(monkeypatch):
    def haystack(target: Target, seed: int, probe: str = "") -> HaystackTarget:
        return HaystackTarget(target, HaystackBuilder(TOKENS, overhead_tokens=0, seed=seed, style="chat"), "fake")

    monkeypatch.setattr(module, "haystack_target", haystack)
    monkeypatch.setattr(
        module, "chat_prompt_counter", lambda target, tokens: (lambda m: TOKENS.count(render(m)), "fake")
    )


def plan(trace: str, **options: Any) -> module.AgentSchedule:
    opts = ReplayOptions(trace=trace, format="otel", **options)
    target = Target(url="http://127.0.0.1:9", model="m", endpoint="chat")
    return module.AgentPlanner(target, opts, CacheSize(1000, 16, "options")).build()


def messages(schedule: module.AgentSchedule, i: int) -> list[dict[str, Any]]:
    return json.loads(schedule.requests[i].spec.body)["messages"]


@pytest.mark.parametrize("trace", TRACES)
def test_one_request_per_call_of_each_copy_in_its_order(fake_engine, trace):
    s = plan(trace, copies=3, copy_interval_s=2.0, input_scale=8, session_header="x-session-id")
    p, a = s.plan, s.plan.agent
    assert a is not None and p.planned_requests == len(s.requests) == 4 * 3 == a.llm_spans * a.copies
    # each copy: the sub-agent's first call forks after the orchestrator's first, its second follows, the
    # orchestrator's second joins it
    assert s.deps == [[], [0], [1], [2], [], [4], [5], [6], [], [8], [9], [10]] == a.deps
    assert a.links[:4] == [[], ["fork"], ["same"], ["join"]]
    # pace deps: the sub-agent's second call waits for its tool (lookup_inventory, 0.25 s); nothing else does
    assert [round(w / 1e9, 3) for w in s.wait_ns[:4]] == [0.0, 0.0, 0.253, 0.0]
    assert [r.offset_ns for r in s.requests[::4]] == [0, 2_000_000_000, 4_000_000_000]  # copies 2 s apart
    sessions = sorted(set(p.sessions))
    assert len(sessions) == 3 and p.sessions[:4] == [p.sessions[0]] * 4 and p.session_header == "x-session-id"
    assert all(r.spec.headers == {"x-session-id": p.sessions[r.index]} for r in s.requests)
    # every prompt counted whole, template included; each output the span's tokens
    assert p.overhead_tokens == 0
    for i, r in enumerate(s.requests):
        assert TOKENS.count(render(messages(s, i))) == p.text_tokens[i] == r.input_tokens
    assert [r.output_tokens for r in s.requests[:4]] == [62, 43, 48, 48] == a.output_tokens[:4]
    assert json.loads(s.requests[0].spec.body)["ignore_eos"] is True


def test_shared_messages_stay_shared_within_a_copy_and_only_system_ones_across(fake_engine):
    s = plan(TRACES[0], copies=2, input_scale=8)
    m0, m3, m4 = messages(s, 0), messages(s, 3), messages(s, 4)
    # the orchestrator's second call extends its first: the same system and user messages, then more
    assert m3[:2] == m0 and [m["role"] for m in m3] == ["system", "user", "assistant", "tool"]
    assert m3[3]["tool_call_id"].startswith("call_")  # a tool result, as recorded
    # the next copy: the same system message, its own user message
    assert m4[0] == m0[0] and m4[1]["content"] != m0[1]["content"]
    p = s.plan
    assert p.hash_ids[3][: len(p.hash_ids[0]) - 1] == p.hash_ids[0][:-1]  # every whole block of call 0
    hits = expected_hits(p.text_tokens, p.hash_ids, p.block_tokens)
    assert hits[3] == 16 * (p.text_tokens[0] // 16) > 0  # every whole block of call 0
    # the next copy's first call: the whole blocks of the system message's segment only (the prompt of it
    # alone, its template's generation prompt included: where the next message begins as that does, shared)
    assert 0 < hits[4] <= TOKENS.count(render(m0[:1])) < p.text_tokens[4]
    assert hits[0] == hits[1] == 0


def test_recorded_pace_waits_the_recorded_gap_and_never_before_the_offset(fake_engine):
    s = plan(TRACES[0], pace="recorded", time_scale=2.0)
    a = s.plan.agent
    assert a is not None
    assert a.floor_s == pytest.approx([x / 2 for x in (0.0, 2.387, 4.171, 5.862)], abs=1e-3)
    assert a.wait_s == pytest.approx([g / 2 for g in a.gap_s]) and a.gap_s[2] == pytest.approx(0.256, abs=1e-3)


def test_tool_messages_as_user_messages_and_the_ratio_fitted(fake_engine):
    s = plan(TRACES[1], tool_role="user", input_scale=8)
    assert [m["role"] for m in messages(s, 3)] == ["system", "user", "assistant", "user"]
    a = s.plan.agent
    assert a is not None and a.tokens_per_char > 0 and a.fit_error_pct < 25
