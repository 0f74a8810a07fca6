"""`run replay --format otel`: a recorded agent's LLM calls replayed, each as one chat request, in the order they
waited for each other (docs/scenarios.md, "replay", "Recorded agent traces").

The trace (`workloads.otel_trace`) gives the calls, their messages' shapes, tokens and times; `workloads.agent_calls`
the order (each call's dependencies: the calls before it in its agent, a sub-agent's fork after its parent's call,
the parent's join after the sub-agent's last) and the waits (think time: the recorded tool time; the recorded gap).
Each call's messages become synthetic text (`workloads.agent_prompts`: one tokens-per-character ratio fitted over
the trace, each message's text a pure function of its digest and salt), its output its recorded output tokens
(ignore_eos). Roles as recorded: system (and developer, which the chat API's `Role` does not take, as system),
user, assistant, and a tool message as a tool result (`--tool-role user`: a user message, for a chat template
that refuses the tool role); any other role as user. Tool definitions are counted in the plan, not sent (their
text is not recorded).

`--copies N` runs the agent N times, `--copy-interval-s` apart, each a session of its own (id `<salt>-<k>`, sent
in `--session-header`): messages of role system and developer are shared by every copy (the salt is the run's),
all others are their copy's own, as real users of one agent share its instructions and nothing else. Each prompt is
counted whole as the engine renders it (`token_counts.chat_prompt_counter`, its prefixes too, for its blocks), so
the plan's `overhead_tokens` is 0. The sender is `load.chained.Chained`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from loadproof.client import RequestSpec
from loadproof.plans.agent_replay import AgentReplay
from loadproof.plans.replay import ReplayPlan
from loadproof.protocol.request import Message, Role, Text, ToolResult
from loadproof.protocol.routes import request_body
from loadproof.protocol.routes.chat import chat_messages
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.long_context import haystack_target
from loadproof.scenarios.replay_cache import CacheSize
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.scenarios.session_header import session_headers
from loadproof.scenarios.target import Target
from loadproof.scenarios.token_counts import PROBE_LINE, chat_prompt_counter
from loadproof.workloads.agent_calls import AgentCall, agent_calls
from loadproof.workloads.agent_prompts import MessageTexts, block_ids, chain, fit_tokens_per_char
from loadproof.workloads.otel_trace import AgentTrace, read_otel_trace
from loadproof.workloads.synthetic import SyntheticPrompts
from loadproof.workloads.traces import TraceError

SHARED_ROLES = ("system", "developer")  # shared by every copy of the agent
ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
DEFAULT_BLOCK = 16  # tokens a block where the engine's KV block size is unknown


@dataclass(frozen=True)
class AgentSchedule:
    """The plan and, per request, its body, its dependencies and its wait after them (ns)."""

    plan: ReplayPlan
    requests: list[Planned]
    deps: list[list[int]]
    wait_ns: list[int]


def read_agent(options: ReplayOptions) -> tuple[AgentTrace, list[AgentCall]]:
    """The trace and its calls, every call checked replayable (TraceError, one line naming file, span and field)."""
    trace = read_otel_trace(options.trace)
    calls = agent_calls(trace)
    for call in calls:
        span = call.span
        where = f"{options.trace}: span {span.span_id} ({span.name})"
        if span.output_tokens is None:
            raise TraceError(
                f"{where}: no output token count (gen_ai.usage.output_tokens or llm.token_count.completion): "
                "its output length is unknown"
            )
        if not span.messages and span.input_tokens is None:
            raise TraceError(
                f"{where}: neither input messages (gen_ai.input.messages, llm.input_messages) nor input tokens "
                "(gen_ai.usage.input_tokens, llm.token_count.prompt): its prompt is unknown"
            )
    return trace, calls


@dataclass(frozen=True)
class _Msg:
    role: Role
    digest: str
    salt: str
    tokens: int


class AgentPlanner:
    """Builds the schedule of `options` on `target` (see the module's docstring)."""

    def __init__(self, target: Target, options: ReplayOptions, cache: CacheSize | None) -> None:
        self.target, self.options, self.cache = target, options, cache
        self.trace, self.calls = read_agent(options)
        self.hs = haystack_target(target, options.seed, PROBE_LINE)
        self.count, self.count_source = chat_prompt_counter(target, self.hs.builder.tokenizer)
        self.texts = MessageTexts(SyntheticPrompts(self.hs.builder, run_salt="", seed=options.seed), options.seed)
        self.salt = secrets.token_hex(3)
        self._counts: dict[tuple[Any, ...], int] = {}
        self.raised = 0

    def _role(self, recorded: str) -> Role:
        if recorded == "tool":
            return "tool" if self.options.tool_role == "tool" else "user"
        return ROLES.get(recorded, "user")

    def _typed(self, m: _Msg) -> Message:
        text = self.texts.text(m.digest, m.salt, m.tokens)
        if m.role == "tool":
            return Message("tool", (ToolResult(f"call_{m.digest[:12]}", text),))
        return Message(m.role, (Text(text),))

    def _count(self, messages: list[_Msg]) -> int:
        """The prompt of these messages as the engine counts it (template included), kept by their keys."""
        key = tuple(messages)
        if key not in self._counts:
            self._counts[key] = self.count(chat_messages(tuple(self._typed(m) for m in messages)))
        return self._counts[key]

    def _messages(self, call: AgentCall, copy: int, ratio: float) -> list[_Msg]:
        span = call.span
        own = f"{self.salt}.{copy}"
        if not span.messages:  # none recorded: one user message of its input tokens, shared with nothing
            digest = f"span-{span.span_id}"
            template = self._count([_Msg("user", digest, own, 0)])
            want = round((span.input_tokens or 0) * self.options.input_scale) - template
            least = self.texts.shortest(digest, own)
            self.raised += want < least
            return [_Msg("user", digest, own, max(least, want))]
        out = []
        for shape in span.messages:
            salt = self.salt if shape.role in SHARED_ROLES else own
            tokens, raised = self.texts.tokens(shape.chars, ratio, shape.digest, salt)
            self.raised += raised
            out.append(_Msg(self._role(shape.role), shape.digest, salt, tokens))
        return out

    def ratio(self) -> float:
        """Tokens per character, fitted over the calls (each template's tokens counted with empty messages)."""
        template = [
            self._count([_Msg(self._role(m.role), m.digest, self.salt, 0) for m in c.span.messages])
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

    def build(self) -> AgentSchedule:
        opts, target = self.options, self.target
        ratio = self.ratio()
        block = opts.block_tokens or (self.cache.block_tokens if self.cache else DEFAULT_BLOCK)
        n = len(self.calls)
        agent = AgentReplay(
            pace=opts.pace,
            copies=opts.copies,
            copy_interval_s=opts.copy_interval_s,
            time_scale=opts.time_scale,
            llm_spans=n,
            tool_spans=sum(s.kind == "tool" for s in self.trace.spans.values()),
            agent_spans=sum(s.kind == "agent" for s in self.trace.spans.values()),
            input_scale=opts.input_scale,
            tokens_per_char=round(ratio, 6),
            tool_role=opts.tool_role,
        )
        requests: list[Planned] = []
        deps: list[list[int]] = []
        waits: list[int] = []
        text_tokens: list[int] = []
        hash_ids: list[list[int]] = []
        sessions: list[str] = []
        errors: list[float] = []
        for copy in range(opts.copies):
            session = f"{self.salt}-{copy}"
            for j, call in enumerate(self.calls):
                i = copy * n + j
                messages = self._messages(call, copy, ratio)
                counts = [self._count(messages[: k + 1]) for k in range(len(messages))]
                segments = list(zip(chain([f"{m.role}|{m.digest}|{m.salt}" for m in messages]), _steps(counts)))
                prompt = counts[-1]
                output = self._output(call, prompt)
                wait_s, floor_s = self._waits(call)
                body = request_body(
                    target.endpoint,
                    target.model,
                    "",
                    messages=[self._typed(m) for m in messages],
                    max_tokens=output,
                    temperature=0.0,
                    ignore_eos=opts.ignore_eos,
                    extra=target.extra_body,
                )
                spec = RequestSpec(
                    request_id=f"replay-c{copy:04d}-{j:04d}",
                    endpoint=target.endpoint,
                    body=body,
                    deadline_s=opts.deadline_s,
                    headers=session_headers(opts.session_header, session),
                )
                offset_ns = round((copy * opts.copy_interval_s + floor_s) * 1e9)
                requests.append(Planned(i, offset_ns, spec, prompt, output))
                deps.append([copy * n + d for d in call.deps])
                waits.append(round(wait_s * 1e9))
                text_tokens.append(prompt)
                hash_ids.append(block_ids(segments, block))
                sessions.append(session)
                recorded = call.span.input_tokens
                if recorded:
                    errors.append(abs(prompt - recorded * opts.input_scale) / (recorded * opts.input_scale))
                agent.spans.append(call.span.span_id)
                agent.copy.append(copy)
                agent.deps.append(deps[-1])
                agent.links.append(list(call.links))
                agent.wait_s.append(round(wait_s, 9))
                agent.floor_s.append(round(floor_s, 9))
                agent.think_s.append(round(call.think_s, 9))
                agent.gap_s.append(round(call.gap_s, 9))
                agent.recorded_input_tokens.append(recorded)
                agent.output_tokens.append(output)
                agent.messages.append(len(messages))
                agent.tools.append(call.span.tools)
        agent.fit_error_pct = round(100 * sum(errors) / len(errors), 3) if errors else 0.0
        agent.raised_messages = self.raised
        recorded_span_s = (max(c.span.end_ns for c in self.calls) - self.calls[0].span.start_ns) / 1e9
        plan = ReplayPlan(
            trace=opts.trace,
            format="otel",
            sha256=self.trace.sha256,
            trace_rows=len(self.trace.spans),
            time_scale=opts.time_scale,
            trace_span_s=round(recorded_span_s, 6),
            block_tokens=block,
            max_output_tokens=opts.max_output_tokens,
            planned_requests=len(requests),
            schedule_span_s=round((opts.copies - 1) * opts.copy_interval_s + recorded_span_s / opts.time_scale, 9),
            max_concurrency=opts.max_concurrency,
            ignore_eos=opts.ignore_eos,
            deadline_s=opts.deadline_s,
            slo=dict(opts.slo or {}),
            endpoint=target.endpoint,
            route=target.route.traits(),
            max_model_len=target.max_model_len,
            overhead_tokens=0,
            overhead_source=self.count_source,
            haystack_additive=self.hs.builder.additive,
            text_tokens=text_tokens,
            hash_ids=hash_ids,
            kv_blocks=self.cache.blocks if self.cache else None,
            kv_block_tokens=self.cache.block_tokens if self.cache else None,
            kv_source=self.cache.source if self.cache else None,
            sessions=sessions,
            session_header=opts.session_header,
            agent=agent,
        )
        return AgentSchedule(plan, requests, deps, waits)

    def _output(self, call: AgentCall, prompt: int) -> int:
        span, opts = call.span, self.options
        output = max(1, span.output_tokens or 0)
        if opts.max_output_tokens is not None:
            output = min(output, opts.max_output_tokens)
        limit = self.target.max_model_len
        if limit is not None and prompt + output > limit:
            raise TraceError(
                f"{opts.trace}: span {span.span_id} ({span.name}): its prompt of {prompt} tokens and {output} "
                f"output tokens pass the served context ({limit}): lower --input-scale or --max-output-tokens"
            )
        return output

    def _waits(self, call: AgentCall) -> tuple[float, float]:
        """Seconds after the call's last dependency's end, and after its copy's start, before it is sent."""
        scale = self.options.time_scale
        if self.options.pace == "recorded":
            return call.gap_s / scale, call.offset_s / scale
        think = call.think_s / scale
        return think, 0.0 if call.deps else think


def _steps(counts: list[int]) -> list[int]:
    """Each message's tokens in the rendered prompt: the growth of the prompt's count as it is added."""
    return [b - a for a, b in zip([0, *counts[:-1]], counts)]
