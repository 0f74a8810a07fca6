"""The sessions plan: users, turns, the lengths of each part of a conversation, the think time and the seed,
so every claim of a multi-turn run is recomputed from its directory alone (docs/scenarios.md, "sessions").

Each turn is one record: `prompt_id` the user (`u<k>`), `batch` the turn (0 is the first), `family`
`cold` (turn 0) or `warm`; `prompt_tokens` (the engine's usage) is the context the turn sent.
Agent turns (`tool_turns`): turns 0 to tool_turns - 1 ask for a tool call; the next turn appends the call
and a tool result of `tool_result_tokens` tokens. `shared_prefix_tokens` is what every user's prompt
shares (the system message's own tokens: its prompt and any tool definitions written in it);
`prime_shared`: that prefix was sent once before the users started (one record of family `prime`, no
turn's); `block_tokens` and `kv_cache_tokens` the engine's KV block and cache size, for the prefix-cache
expectations (metrics.sessions), and `checkpoint_window_tokens` a hybrid model's sliding window that the engine
keeps at checkpoints only (metrics.prefix_checkpoints). Standard library and msgspec only.
"""

from __future__ import annotations

from typing import Any

from loadproof.plans import Plan
from loadproof.plans.datasets import DatasetRef
from loadproof.plans.load import MixedModel


class SessionsPlan(Plan, kw_only=True):
    users: int
    turns: int
    first_tokens: int  # tokens of the first user message (text)
    turn_tokens: int  # tokens of each later user message
    system_tokens: int = 0  # a system prompt every user shares (the agent pattern)
    tool_tokens: int = 0  # tool output appended before each later user message (the agent pattern)
    output_tokens: int
    think_time: str = "0"  # seconds between a reply and the next turn: X or uniform:LO:HI
    stagger_s: float = 0.0  # the users' first turns spread over this many seconds
    seed: int = 731
    ignore_eos: bool = True
    deadline_s: float | None = None
    endpoint: str | None = None
    overhead_tokens: int | None = None
    dataset: DatasetRef | None = None  # --dataset: ShareGPT conversations as the users' messages (rows_sent: per user)
    # agent turns (docs/scenarios.md, "sessions", "Agent turns"); absent in runs before them
    tool_definitions_tokens: int = 0  # generated tool definitions of about this many tokens (0: none)
    tool_names: list[str] = []  # the tools defined (generated, in order)
    tools_in_prompt: bool = True  # the definitions written into the system message (else left to the template)
    tool_turns: int = 0  # turns 0 .. tool_turns - 1 ask for a tool call
    tool_result_tokens: int = 0  # the tool result appended after each call
    tool_choice: str | None = None  # "required" or a tool's name (chat); None: no tool turns
    tool_call_mode: str | None = None  # "tools": calls through the chat API; "text": the answer text stands in
    shared_prefix_tokens: int | None = None  # tokens of the system message's text (prompt + definitions)
    prime_shared: bool = False  # the shared prefix sent once (record family "prime") before the users started
    block_tokens: int | None = None  # the engine's KV block size, tokens (None: no expectation computed)
    kv_cache_tokens: int | None = None  # the engine's KV cache, tokens (None: no bounded expectation)
    kv_source: str | None = None  # where block_tokens and kv_cache_tokens came from
    # a hybrid model's sliding window, tokens, where the engine keeps that window's KV only at checkpoints (vLLM's
    # hybrid KV cache manager, prefix_cache_retention_interval 0): the checkpointed expectation (metrics.sessions);
    # None: every block kept, or a run from before it
    checkpoint_window_tokens: int | None = None
    checkpoint_source: str | None = None  # where checkpoint_window_tokens came from
    cpu_tier_tokens: int | None = None  # the engine's CPU tier for the KV cache, tokens (metrics.session_tier)
    kv_bytes_per_token: int | None = None  # bytes one token's KV takes, for the tier's transfer time
    h2d_gbps: float | None = None  # the measured host-to-device bandwidth, 1e9 bytes/s
    slo: dict[str, float] = {}  # --slo: per-request SLOs in seconds, by name (the good tokens)
    model_mix: list[MixedModel] = []  # --model-mix: each model's weight; each user's model is in its records
    session_header: str | None = None  # --session-header: the HTTP header each turn carried its user's session in
    session_ids: list[str] = []  # each user's session id (`<salt>-u<k>`; records: prompt_id `u<k>`)

    def workload(self) -> dict[str, Any]:
        return {
            "users": self.users,
            "turns": self.turns,
            "first_tokens": self.first_tokens,
            "turn_tokens": self.turn_tokens,
            "system_tokens": self.system_tokens,
            "tool_tokens": self.tool_tokens,
            "output_tokens": self.output_tokens,
            "think_time": self.think_time,
            "stagger_s": self.stagger_s,
            "ignore_eos": self.ignore_eos,
            **({"prime_shared": True} if self.prime_shared else {}),
            **({"model_mix": {m.model: m.weight for m in self.model_mix}} if self.model_mix else {}),
            **({"dataset": self.dataset.key()} if self.dataset is not None else {}),
            **(
                {
                    "tool_definitions_tokens": self.tool_definitions_tokens,
                    "tools_in_prompt": self.tools_in_prompt,
                    "tool_turns": self.tool_turns,
                    "tool_result_tokens": self.tool_result_tokens,
                    "tool_choice": self.tool_choice,
                }
                if self.tool_turns or self.tool_definitions_tokens
                else {}
            ),
        }
