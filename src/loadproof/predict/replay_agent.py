"""A recorded agent (`run replay --format otel`) shaped as the scenario sends it, for the simulator's predictions of
it (`predict.replay` on one engine, `predict.replay_fleet` on a fleet): the same requests, sized by the scenario's own
`scenarios.agent_requests` without an engine, each sent on the virtual clock after its dependencies (`fleet.Chain`).

- **Token counts**: the model's tokenizer and its chat template rendered here (`ReplayEngine.tokenizer`; `plan`
  gives the profile's model's, an embedded profile's prepared folder), as `run replay --token-counts local` counts
  them; without one, the simulator's own (a byte a token, its chat template: what `loadproof sim` counts). Either
  way each message's tokens come from the one tokens-per-character ratio fitted to the recorded input tokens, so
  the prompts' lengths follow the trace; the tokenizer sets the template's tokens and the filler's text.
- **Blocks**: each prompt's full KV blocks of the engine's size named by `agent_prompts.block_ids` (a block's id
  names everything before it): two prompts share a KV block exactly when the scenario's prompts would.
- **Order**: copy k's requests after k x `--copy-interval-s`, each after its copy's requests it depends on ended
  and its wait (`--pace deps`: the recorded tool time; `recorded`: the recorded gap and never before its offset).
- **Sessions**: copy k's id, as `--session-header` sends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadproof.metrics.replay import expected_hits
from loadproof.plans.replay import ReplayPlan
from loadproof.predict.fleet import Chain
from loadproof.scenarios.agent_replay import read_agent
from loadproof.scenarios.agent_requests import AgentRequests, ChatCounter
from loadproof.scenarios.replay_options import ReplayOptions
from loadproof.scenarios.token_counts import ChatTemplate
from loadproof.sim import text as sim_text
from loadproof.sim.config import SimConfig
from loadproof.workloads.agent_prompts import MessageTexts, block_ids
from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.synthetic import SyntheticPrompts
from loadproof.workloads.tokens import LocalTokens, Tokens

SALT = "predicted"  # the run's salt: a prediction's messages are a pure function of the trace and the seed


@dataclass(frozen=True)
class PromptCounts:
    """What counts a chat prompt's tokens: the text's tokens, the whole prompt's (template included), and how."""

    tokens: Tokens
    count: ChatCounter
    how: str


def prompt_counts(tokenizer: Path | None) -> PromptCounts:
    """The model's tokenizer and chat template (a folder, or its tokenizer.json), else the simulator's."""
    if tokenizer is None:
        sim_tokens = LocalTokens.load(sim_text.tokenizer_path())
        return PromptCounts(
            sim_tokens,
            lambda messages: sim_tokens.count(sim_text.chat_prompt(messages)),
            "the simulator's counts (a byte a token, its chat template)",
        )
    tokens = LocalTokens.load(tokenizer)
    template = ChatTemplate.load(tokenizer)
    return PromptCounts(
        tokens,
        lambda messages: tokens.count(template.render(messages)),
        f"the model's tokenizer and chat template ({template.origin}) rendered here",
    )


@dataclass(frozen=True)
class AgentRequestsShaped:
    """The requests (copy-major), each one's floor offset, lengths, KV block hashes and session, their order, the
    plan the claims read, and what the scenario's plan would hold of the sizing."""

    plan: ReplayPlan
    offsets_s: list[float]  # each request's floor: its copy's start + its own
    inputs: list[int]
    outputs: list[int]
    hashes: list[list[int]]
    sessions: list[str | None]
    chain: Chain
    expected_hit_pct: float  # from the prompts' shared blocks (an unbounded cache, copy-major order)
    tokens_per_char: float
    counted_by: str


def agent_requests(config: SimConfig, options: ReplayOptions, tokenizer: Path | None) -> AgentRequestsShaped:
    """Read the trace and size its copies' requests as `run replay --format otel` does (see the module doc)."""
    trace, calls = read_agent(options)
    counts = prompt_counts(tokenizer)
    builder = HaystackBuilder(counts.tokens, overhead_tokens=0, seed=options.seed, style="chat")
    texts = MessageTexts(SyntheticPrompts(builder, run_salt="", seed=options.seed), options.seed)
    sizer = AgentRequests(calls, options, counts.count, texts, SALT, config.max_model_len)
    ratio = sizer.ratio()
    sized = sizer.sized(ratio)
    kv = config.block_size
    block = options.block_tokens or kv
    inputs = [s.prompt for s in sized]
    ids = [block_ids(s.segments, block) for s in sized]
    plan = sizer.plan(trace, block, inputs, ids, max_model_len=config.max_model_len)
    hits = expected_hits(inputs, ids, block)
    return AgentRequestsShaped(
        plan,
        [s.copy * options.copy_interval_s + s.floor_s for s in sized],
        inputs,
        [s.output for s in sized],
        [block_ids(s.segments, kv)[: s.prompt // kv] for s in sized],
        list[str | None](plan.sessions),
        Chain([s.deps for s in sized], [s.wait_s for s in sized]),
        100 * sum(hits) / sum(inputs) if sum(inputs) else 0.0,
        ratio,
        counts.how,
    )
