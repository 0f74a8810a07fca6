"""What `run replay --format otel` planned beyond a trace replay's plan (`plans.replay.ReplayPlan.agent`): how the
recorded agent was paced and copied, how its messages were sized, and per request (copy-major: request
`copy x calls + call`) the span it replays, its dependencies and its waits, so the order and the think time kept
are recomputed from the run directory alone (docs/scenarios.md, "replay", "Recorded agent traces").

The request's prompt tokens and block ids are the replay plan's own `text_tokens` and `hash_ids` (with
`overhead_tokens` 0: a prompt is counted whole, its chat template included), so the prefix-cache expectation
is the replay's. Standard library and msgspec only.
"""

from __future__ import annotations

import msgspec


class AgentReplay(msgspec.Struct, kw_only=True):
    pace: str  # "deps": as fast as the dependencies allow, think = tool time; "recorded": the recorded gaps
    copies: int  # runs of the recorded agent, each a session of its own
    copy_interval_s: float  # copy k starts k x this after the schedule's start
    time_scale: float = 1.0  # every think time, gap and offset divided by this
    llm_spans: int  # LLM calls in the trace (a copy sends each once)
    tool_spans: int = 0
    agent_spans: int = 0
    input_scale: float = 1.0  # each call's prompt sized to its recorded input tokens x this
    tokens_per_char: float  # the one ratio fitted over the trace: a message of C characters is C x this tokens
    fit_error_pct: float = 0.0  # mean |prompt - recorded input x input_scale| / (recorded x input_scale) x 100
    raised_messages: int = 0  # messages raised to the shortest a synthetic message can be (its head and a pad)
    tool_role: str = "tool"  # what a recorded tool message was sent as: "tool" (a tool result) or "user"
    spans: list[str] = []  # per request: the LLM span it replays
    copy: list[int] = []  # per request: its copy
    deps: list[list[int]] = []  # per request: the requests it waits for (its copy's)
    links: list[list[str]] = []  # per dependency: same, fork, join or across (workloads.agent_calls)
    wait_s: list[float] = []  # per request: seconds after its last dependency's end before it is sent
    floor_s: list[float] = []  # per request: seconds after its copy's start before it is sent
    think_s: list[float] = []  # per request: the recorded tool time it waited (unscaled)
    gap_s: list[float] = []  # per request: the recorded gap after its last dependency (unscaled)
    recorded_input_tokens: list[int | None] = []  # per request: its span's input tokens
    output_tokens: list[int] = []  # per request: max_tokens asked (the span's output tokens, capped)
    messages: list[int] = []  # per request: messages sent
    tools: list[int] = []  # per request: tool definitions the span offered (recorded, not sent)

    def allowed_ns(self, i: int, start_ns: int, dep_ends_ns: list[int]) -> int:
        """When request i may be sent: its copy's start + its floor, and its last dependency's end + its wait."""
        floor = start_ns + round((self.copy[i] * self.copy_interval_s + self.floor_s[i]) * 1e9)
        if not dep_ends_ns:
            return floor
        return max(floor, max(dep_ends_ns) + round(self.wait_s[i] * 1e9))
