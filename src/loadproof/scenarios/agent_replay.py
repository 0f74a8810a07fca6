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
the plan's `overhead_tokens` is 0. The requests are sized by `scenarios.agent_requests` (which the simulator's
prediction, `predict.replay_agent`, sizes them with too, on the profile's tokenizer). The sender is
`load.chained.Chained`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from loadproof.client import RequestSpec
from loadproof.plans.agent_replay import AgentReplay
from loadproof.plans.replay import ReplayPlan
from loadproof.protocol.routes import request_body
from loadproof.scenarios.agent_requests import AgentRequests
from loadproof.scenarios.load.schedule import Planned
from loadproof.scenarios.long_context import haystack_target
from loadproof.scenarios.replay_cache import CacheSize
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.scenarios.session_header import session_headers
from loadproof.scenarios.target import Target
from loadproof.scenarios.token_counts import PROBE_LINE, chat_prompt_counter
from loadproof.workloads.agent_calls import AgentCall, agent_calls
from loadproof.workloads.agent_prompts import MessageTexts, block_ids
from loadproof.workloads.otel_trace import AgentTrace, read_otel_trace
from loadproof.workloads.synthetic import SyntheticPrompts
from loadproof.workloads.traces import TraceError

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


class AgentPlanner:
    """Builds the schedule of `options` on `target` (see the module's docstring); the requests are sized by
    `agent_requests.AgentRequests` with the target's chat prompt counter."""

    def __init__(self, target: Target, options: ReplayOptions, cache: CacheSize | None) -> None:
        self.target, self.options, self.cache = target, options, cache
        self.trace, self.calls = read_agent(options)
        self.hs = haystack_target(target, options.seed, PROBE_LINE)
        self.count, self.count_source = chat_prompt_counter(target, self.hs.builder.tokenizer)
        self.texts = MessageTexts(SyntheticPrompts(self.hs.builder, run_salt="", seed=options.seed), options.seed)
        self.salt = secrets.token_hex(3)
        self.sizer = AgentRequests(self.calls, options, self.count, self.texts, self.salt, target.max_model_len)

    def build(self) -> AgentSchedule:
        opts, target = self.options, self.target
        ratio = self.sizer.ratio()
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
        errors: list[float] = []
        for sized in self.sizer.sized(ratio):
            call, copy, messages, prompt, output = sized.call, sized.copy, sized.messages, sized.prompt, sized.output
            body = request_body(
                target.endpoint,
                target.model,
                "",
                messages=[self.sizer.typed(m) for m in messages],
                max_tokens=output,
                temperature=0.0,
                ignore_eos=opts.ignore_eos,
                extra=target.extra_body,
            )
            session = self.sizer.session(copy)
            spec = RequestSpec(
                request_id=f"replay-c{copy:04d}-{sized.index - copy * n:04d}",
                endpoint=target.endpoint,
                body=body,
                deadline_s=opts.deadline_s,
                headers=session_headers(opts.session_header, session),
            )
            offset_ns = round((copy * opts.copy_interval_s + sized.floor_s) * 1e9)
            requests.append(Planned(sized.index, offset_ns, spec, prompt, output))
            deps.append(sized.deps)
            waits.append(round(sized.wait_s * 1e9))
            text_tokens.append(prompt)
            hash_ids.append(block_ids(sized.segments, block))
            recorded = call.span.input_tokens
            if recorded:
                errors.append(abs(prompt - recorded * opts.input_scale) / (recorded * opts.input_scale))
            agent.spans.append(call.span.span_id)
            agent.copy.append(copy)
            agent.deps.append(deps[-1])
            agent.links.append(list(call.links))
            agent.wait_s.append(round(sized.wait_s, 9))
            agent.floor_s.append(round(sized.floor_s, 9))
            agent.think_s.append(round(call.think_s, 9))
            agent.gap_s.append(round(call.gap_s, 9))
            agent.recorded_input_tokens.append(recorded)
            agent.output_tokens.append(output)
            agent.messages.append(len(messages))
            agent.tools.append(call.span.tools)
        agent.fit_error_pct = round(100 * sum(errors) / len(errors), 3) if errors else 0.0
        agent.raised_messages = self.sizer.raised
        plan = self.sizer.plan(
            self.trace,
            block,
            text_tokens,
            hash_ids,
            deadline_s=opts.deadline_s,
            endpoint=target.endpoint,
            route=target.route.traits(),
            max_model_len=target.max_model_len,
            overhead_source=self.count_source,
            haystack_additive=self.hs.builder.additive,
            kv_blocks=self.cache.blocks if self.cache else None,
            kv_block_tokens=self.cache.block_tokens if self.cache else None,
            kv_source=self.cache.source if self.cache else None,
            agent=agent,
        )
        return AgentSchedule(plan, requests, deps, waits)
