"""The example plan: the prompt, how many tokens each request asks, each round's request ids."""

from __future__ import annotations

from typing import Any

from loadproof.plans import Plan


class ExamplePlan(Plan, kw_only=True):
    prompt: str
    max_tokens: int
    rounds: list[list[str]]  # per round, its request ids in the order sent

    def workload(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "requests per round": len(self.rounds[0]) if self.rounds else 0}
