"""A recorded agent's requests sized as `run replay --format otel` sends them, without an engine: what the scenario
(`scenarios.agent_replay`, on a target) and the simulator's prediction of it (`predict.replay_agent`, on the
profile's tokenizer) both plan from.

Given the trace's calls, the replay's options, a chat prompt counter (messages -> the prompt's tokens as the engine
renders them, template included) and the message texts (`workloads.agent_prompts.MessageTexts`), each request of
each copy (copy-major: request `copy x calls + call`) gets its messages (role, digest, salt, tokens: one ratio of
tokens per character fitted over the trace), its prompt's tokens and segments (each message's share of the
rendered prompt, for its block ids), its output tokens, its dependencies (its copy's) and its waits. Messages of
role system and developer are shared by every copy (the run's salt), all others are their copy's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadproof.plans.replay import ReplayPlan
from loadproof.protocol.request import Message, Role, Text, ToolResult
from loadproof.protocol.routes.chat import chat_messages
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.workloads.agent_calls import AgentCall
from loadproof.workloads.agent_prompts import MessageTexts, chain, fit_tokens_per_char
from loadproof.workloads.otel_trace import AgentTrace
from loadproof.workloads.traces import TraceError

SHARED_ROLES = ("system", "developer")  # shared by every copy of the agent
ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}

ChatCounter = Callable[[list[dict[str, Any]]], int]  # a chat request's messages -> its prompt's tokens


@dataclass(frozen=True)
class AgentMessage:
    role: Role
    digest: str
    salt: str
    tokens: int


@dataclass(frozen=True)
class SizedCall:
    """One request: a copy's call, its messages, its prompt's tokens and segments ((chained key, tokens) one after
    another: `agent_prompts.block_ids`' input), its output, the requests it waits for and its waits (s)."""

    index: int
    copy: int
    call: AgentCall
    messages: list[AgentMessage]
    segments: list[tuple[str, int]]
    prompt: int
    output: int
    deps: list[int]
    wait_s: float  # after its last dependency's end
    floor_s: float  # after its copy's start


class AgentRequests:
    """Sizes every copy's calls of a recorded agent (see the module's docstring); `raised` counts the messages
    raised to the shortest a synthetic message can be."""

    def __init__(
        self,
        calls: list[AgentCall],
        options: ReplayOptions,
        count: ChatCounter,
        texts: MessageTexts,
        salt: str,
        max_model_len: int | None,
    ) -> None:
        self.calls, self.options, self.texts, self.salt = calls, options, texts, salt
        self._counter = count
        self.max_model_len = max_model_len
        self._counts: dict[tuple[Any, ...], int] = {}
        self.raised = 0

    def session(self, copy: int) -> str:
        return f"{self.salt}-{copy}"

    def role(self, recorded: str) -> Role:
        if recorded == "tool":
            return "tool" if self.options.tool_role == "tool" else "user"
        return ROLES.get(recorded, "user")

    def typed(self, m: AgentMessage) -> Message:
        text = self.texts.text(m.digest, m.salt, m.tokens)
        if m.role == "tool":
            return Message("tool", (ToolResult(f"call_{m.digest[:12]}", text),))
        return Message(m.role, (Text(text),))

    def count(self, messages: list[AgentMessage]) -> int:
        """The prompt of these messages as the engine counts it (template included), kept by their keys."""
        key = tuple(messages)
        if key not in self._counts:
            self._counts[key] = self._counter(chat_messages(tuple(self.typed(m) for m in messages)))
        return self._counts[key]

    def messages(self, call: AgentCall, copy: int, ratio: float) -> list[AgentMessage]:
        span = call.span
        own = f"{self.salt}.{copy}"
        if not span.messages:  # none recorded: one user message of its input tokens, shared with nothing
            digest = f"span-{span.span_id}"
            template = self.count([AgentMessage("user", digest, own, 0)])
            want = round((span.input_tokens or 0) * self.options.input_scale) - template
            least = self.texts.shortest(digest, own)
            self.raised += want < least
            return [AgentMessage("user", digest, own, max(least, want))]
        out = []
        for shape in span.messages:
            salt = self.salt if shape.role in SHARED_ROLES else own
            tokens, raised = self.texts.tokens(shape.chars, ratio, shape.digest, salt)
            self.raised += raised
            out.append(AgentMessage(self.role(shape.role), shape.digest, salt, tokens))
        return out

    def ratio(self) -> float:
        """Tokens per character, fitted over the calls (each template's tokens counted with empty messages)."""
        template = [
            self.count([AgentMessage(self.role(m.role), m.digest, self.salt, 0) for m in c.span.messages])
            if c.span.messages
            else 0
            for c in self.calls
        ]
        chars = [sum(m.chars for m in c.span.messages) for c in self.calls]
        scale = self.options.input_scale
        inputs = [
            None if c.span.input_tokens is None or not c.span.messages else c.span.input_tokens * scale
            for c in self.calls
        ]
        return fit_tokens_per_char(chars, [None if x is None else round(x) for x in inputs], template)

    def sized(self, ratio: float) -> list[SizedCall]:
        """Every copy's calls, copy-major, their messages sized at `ratio` tokens per character."""
        n = len(self.calls)
        out = []
        for copy in range(self.options.copies):
            for j, call in enumerate(self.calls):
                messages = self.messages(call, copy, ratio)
                counts = [self.count(messages[: k + 1]) for k in range(len(messages))]
                segments = list(zip(chain([f"{m.role}|{m.digest}|{m.salt}" for m in messages]), _steps(counts)))
                prompt = counts[-1]
                wait_s, floor_s = self.waits(call)
                deps = [copy * n + d for d in call.deps]
                out.append(
                    SizedCall(
                        copy * n + j,
                        copy,
                        call,
                        messages,
                        segments,
                        prompt,
                        self.output(call, prompt),
                        deps,
                        wait_s,
                        floor_s,
                    )
                )
        return out

    def plan(
        self, trace: AgentTrace, block_tokens: int, text_tokens: list[int], hash_ids: list[list[int]], **more: Any
    ) -> ReplayPlan:
        """The replay plan of the sized requests (copy-major; their prompts counted whole: `overhead_tokens` 0), with
        `more` of its fields (the target's: its endpoint, context, cache; the agent's own)."""
        opts = self.options
        span_s = (max(c.span.end_ns for c in self.calls) - self.calls[0].span.start_ns) / 1e9
        n = len(self.calls)
        return ReplayPlan(
            trace=opts.trace,
            format="otel",
            sha256=trace.sha256,
            trace_rows=len(trace.spans),
            time_scale=opts.time_scale,
            trace_span_s=round(span_s, 6),
            block_tokens=block_tokens,
            max_output_tokens=opts.max_output_tokens,
            planned_requests=len(text_tokens),
            schedule_span_s=round((opts.copies - 1) * opts.copy_interval_s + span_s / opts.time_scale, 9),
            max_concurrency=opts.max_concurrency,
            ignore_eos=opts.ignore_eos,
            slo=dict(opts.slo or {}),
            overhead_tokens=0,
            text_tokens=text_tokens,
            hash_ids=hash_ids,
            sessions=[self.session(i // n) for i in range(len(text_tokens))],
            session_header=opts.session_header,
            **more,
        )

    def output(self, call: AgentCall, prompt: int) -> int:
        span, opts = call.span, self.options
        output = max(1, span.output_tokens or 0)
        if opts.max_output_tokens is not None:
            output = min(output, opts.max_output_tokens)
        limit = self.max_model_len
        if limit is not None and prompt + output > limit:
            raise TraceError(
                f"{opts.trace}: span {span.span_id} ({span.name}): its prompt of {prompt} tokens and {output} "
                f"output tokens pass the served context ({limit}): lower --input-scale or --max-output-tokens"
            )
        return output

    def waits(self, call: AgentCall) -> tuple[float, float]:
        """Seconds after the call's last dependency's end, and after its copy's start, before it is sent."""
        scale = self.options.time_scale
        if self.options.pace == "recorded":
            return call.gap_s / scale, call.offset_s / scale
        think = call.think_s / scale
        return think, 0.0 if call.deps else think


def _steps(counts: list[int]) -> list[int]:
    """Each message's tokens in the rendered prompt: the growth of the prompt's count as it is added."""
    return [b - a for a, b in zip([0, *counts[:-1]], counts)]
