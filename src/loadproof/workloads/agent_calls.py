"""The LLM calls of a recorded agent run (`workloads.otel_trace`), each with the calls it waits for and the time it
waited beyond them: what `run replay --format otel` sends (scenarios.agent_replay), one request a call.

- **Dependencies**: `AgentTrace.waits_for` restricted to LLM spans (every LLM span in the subtree of each span it
  waits for), kept as the direct ones only (a call that another of its dependencies already waits for is
  dropped: the order they imply is the same). A call waits for the calls before it in its agent; a sub-agent's
  first call for its parent's call before it (a fork); the parent's next call for the sub-agent's last (a join).
- **Links**: each dependency's kind, by the agents of the two calls (a call's agent: the nearest agent span
  above it): `same` agent, `fork` (the call's agent is below the dependency's), `join` (the dependency's agent
  is below the call's), `across` (neither: sequential sibling sub-agents).
- **Think time**: the recorded tool time between its last dependency's end and its start: the union of the
  intervals of the tool spans it waits for that hold no LLM span (a sub-agent called as a tool is not think
  time: its calls are replayed), clipped to that window (tools run in parallel count once). A call with no
  dependency: the window starts at the first call's start.
- **Gap**: its start - its last dependency's end, framework overhead included (no dependency: its offset, its
  start - the first call's start).

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadproof.workloads.otel_trace import AgentTrace, Span

Link = str  # "same" | "fork" | "join" | "across"


@dataclass(frozen=True)
class AgentCall:
    span: Span
    agent: str | None  # the span id of the nearest agent span above it (None: none)
    deps: tuple[int, ...]  # indexes (in `agent_calls`' order) of the calls it waits for directly
    links: tuple[Link, ...]  # each dependency's kind
    think_s: float  # recorded tool time between its last dependency's end and its start
    gap_s: float  # its start - its last dependency's end (none: its offset)
    offset_s: float  # its start - the first call's start


def agent_calls(trace: AgentTrace) -> list[AgentCall]:
    """Every LLM call of the trace in the order they started, with its dependencies, links and waits."""
    calls = trace.of_kind("llm")
    index = {c.span_id: i for i, c in enumerate(calls)}
    origin = calls[0].start_ns
    llm_below = {s: [x for x in trace.subtree(s) if trace.spans[x].kind == "llm"] for s in trace.spans}
    waited = [trace.waits_for(c.span_id) for c in calls]
    full = [{index[x] for s in w for x in llm_below[s]} for w in waited]
    out = []
    for i, call in enumerate(calls):
        direct = sorted(j for j in full[i] if not any(j in full[k] for k in full[i] if k != j))
        agent = _agent_of(trace, call.span_id)
        links = tuple(_link(trace, _agent_of(trace, calls[j].span_id), agent) for j in direct)
        last_end = max((calls[j].end_ns for j in full[i]), default=None)
        since = origin if last_end is None else last_end
        tools = [
            trace.spans[x]
            for s in waited[i]
            for x in trace.subtree(s)
            if trace.spans[x].kind == "tool" and not llm_below[x]
        ]
        out.append(
            AgentCall(
                span=call,
                agent=agent,
                deps=tuple(direct),
                links=links,
                think_s=_covered_ns([(t.start_ns, t.end_ns) for t in tools], since, call.start_ns) / 1e9,
                gap_s=max(0, call.start_ns - since) / 1e9,
                offset_s=(call.start_ns - origin) / 1e9,
            )
        )
    return out


def _agent_of(trace: AgentTrace, span_id: str) -> str | None:
    parent = trace.spans[span_id].parent_id
    while parent is not None:
        if trace.spans[parent].kind == "agent":
            return parent
        parent = trace.spans[parent].parent_id
    return None


def _below(trace: AgentTrace, agent: str | None, above: str | None) -> bool:
    """Whether agent `agent` is (strictly) below agent `above` (None: above every agent)."""
    if agent is None or agent == above:
        return False
    node = _agent_of(trace, agent)
    while node is not None:
        if node == above:
            return True
        node = _agent_of(trace, node)
    return above is None


def _link(trace: AgentTrace, dep_agent: str | None, agent: str | None) -> Link:
    if dep_agent == agent:
        return "same"
    if _below(trace, agent, dep_agent):
        return "fork"
    if _below(trace, dep_agent, agent):
        return "join"
    return "across"


def _covered_ns(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Nanoseconds of [lo, hi] that the intervals cover (their union, clipped)."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo))
    total, reach = 0, lo
    for a, b in clipped:
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total
