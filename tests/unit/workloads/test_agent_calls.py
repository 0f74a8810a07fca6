"""A recorded agent's calls in the order they wait for each other: the direct LLM dependencies of each call
(sequence, fork, join, parallel sub-agents, sequential sibling sub-agents), its think time (the tool time it
waited, parallel tools counted once, a sub-agent called as a tool not counted) and its recorded gap."""

from __future__ import annotations

import pytest

from loadproof.workloads.agent_calls import agent_calls
from loadproof.workloads.otel_trace import read_otel_trace
from tests.unit.workloads.test_otel_trace import AGENT, chat, otlp, span, write


def test_each_call_waits_for_the_calls_it_depends_on_directly(tmp_path):
    calls = agent_calls(read_otel_trace(write(tmp_path, otlp(*AGENT))))
    assert [c.span.span_id for c in calls] == ["c1", "s1", "s2", "c2", "p1c", "p2c", "c3"]
    # s1 forks after c1; s2 follows s1 (c1 through it); c2 joins s2 (the sub-agent's last); the two parallel
    # sub-agents fork after c2 and wait for neither; c3 joins both
    assert [c.deps for c in calls] == [(), (0,), (1,), (2,), (3,), (3,), (4, 5)]
    assert [c.links for c in calls] == [(), ("fork",), ("same",), ("join",), ("fork",), ("fork",), ("join", "join")]
    assert [c.agent for c in calls] == ["a0", "s0", "s0", "a0", "p1", "p2", "a0"]


def test_think_time_is_the_tool_time_waited_and_the_gap_the_whole_wait(tmp_path):
    calls = {c.span.span_id: c for c in agent_calls(read_otel_trace(write(tmp_path, otlp(*AGENT))))}
    # s1 waited 5 ms after c1: the tool t1 (10-15 ms) ran then
    assert calls["s1"].think_s == pytest.approx(0.005) and calls["s1"].gap_s == pytest.approx(0.005)
    assert calls["s2"].think_s == calls["s2"].gap_s == 0
    # p2c started 1 ms after c2 ended, with no tool between: gap, no think time
    assert calls["p2c"].think_s == 0 and calls["p2c"].gap_s == pytest.approx(0.001)
    assert calls["c3"].offset_s == pytest.approx(0.098) and calls["c1"].offset_s == 0


def test_parallel_tools_count_once_and_a_sub_agent_called_as_a_tool_is_not_think_time(tmp_path):
    spans = [
        span("a0", None, 0, 100, "invoke_agent"),
        chat("c1", "a0", 0, 10),
        span("tA", "a0", 10, 20, "execute_tool"),
        span("tB", "a0", 15, 25, "execute_tool"),  # overlaps tA: 10-25 ms covered once, 15 ms
        chat("c2", "a0", 25, 30),
        span("tS", "a0", 30, 60, "execute_tool"),  # a sub-agent called as a tool: its call is replayed
        span("s0", "tS", 31, 59, "invoke_agent"),
        chat("s1", "s0", 32, 58),
        chat("c3", "a0", 60, 70),
    ]
    calls = {c.span.span_id: c for c in agent_calls(read_otel_trace(write(tmp_path, otlp(*spans))))}
    assert calls["c2"].think_s == pytest.approx(0.015) and calls["c2"].gap_s == pytest.approx(0.015)
    assert calls["s1"].links == ("fork",) and calls["s1"].think_s == 0  # tS holds an LLM span
    assert calls["c3"].deps == (2,) and calls["c3"].links == ("join",) and calls["c3"].think_s == 0


def test_sequential_sibling_sub_agents_are_linked_across(tmp_path):
    spans = [
        span("a0", None, 0, 100, "invoke_agent"),
        span("x", "a0", 0, 40, "invoke_agent"),
        chat("x1", "x", 0, 40),
        span("y", "a0", 50, 90, "invoke_agent"),
        chat("y1", "y", 50, 90),
    ]
    calls = agent_calls(read_otel_trace(write(tmp_path, otlp(*spans))))
    assert calls[1].deps == (0,) and calls[1].links == ("across",)
    assert calls[1].gap_s == pytest.approx(0.010) and calls[1].think_s == 0
