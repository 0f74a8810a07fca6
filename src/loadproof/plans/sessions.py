"""The sessions plan: users, turns, the lengths of each part of a conversation, the think time and the seed,
so every claim of a multi-turn run is recomputed from its directory alone (docs/scenarios.md, "sessions").

Each turn is one record: `prompt_id` the user (`u<k>`), `batch` the turn (0 is the first), `family`
`cold` (turn 0) or `warm`; `prompt_tokens` (the engine's usage) is the context the turn sent.
Standard library and msgspec only.
"""

from __future__ import annotations

from typing import Any

from loadproof.plans import Plan
from loadproof.plans.datasets import DatasetRef


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

    def workload(self) -> dict[str, Any]:
        return {"users": self.users, "turns": self.turns, "first_tokens": self.first_tokens,
                "turn_tokens": self.turn_tokens, "system_tokens": self.system_tokens, "tool_tokens": self.tool_tokens,
                "output_tokens": self.output_tokens, "think_time": self.think_time, "stagger_s": self.stagger_s,
                "ignore_eos": self.ignore_eos, **({"dataset": self.dataset.key()} if self.dataset is not None else {})}
