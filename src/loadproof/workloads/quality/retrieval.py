"""Long-context retrieval checks: one planted fact per haystack prompt, asked at several lengths and depths.

The prompts come from the haystack workload (exact length, unique salt, a 7-digit code planted at a
chosen depth); an answer counts as retrieved when the code appears in its first 200 characters
(workloads.answer_window, the rule the capacity and interference claims use).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loadproof.workloads.answer_window import answer_head
from loadproof.workloads.haystack import HaystackBuilder, HaystackPrompt, retrieved

MAX_TOKENS = 24  # the code and a few words; the question asks for it first
_DIGITS = re.compile(r"\d{4,}")


@dataclass(frozen=True)
class RetrievalItem:
    item_id: str
    length_tokens: int
    depth: float
    prompt: HaystackPrompt

    @property
    def expected(self) -> str:
        return self.prompt.asked.value


def item_id(length_tokens: int, depth: float) -> str:
    return f"retrieval-{length_tokens}-d{round(depth * 100):02d}"


def build_items(builder: HaystackBuilder, lengths: list[int], depths: list[float]) -> list[RetrievalItem]:
    items = []
    for length in lengths:
        for depth in depths:
            ident = item_id(length, depth)
            items.append(RetrievalItem(ident, length, depth, builder.build(ident, length, depths=[depth])))
    return items


def score(item: RetrievalItem, answer: str) -> dict[str, object]:
    """`extracted` is the planted code when it was retrieved, else the first digit run of the answer's start."""
    probe = item.prompt.asked
    if retrieved(probe, answer):
        extracted: str | None = probe.value
    else:
        match = _DIGITS.search(answer_head(answer))
        extracted = match.group(0)[:16] if match else None
    return {
        "length_tokens": item.length_tokens,
        "depth": item.depth,
        "extracted": extracted,
        "expected": probe.value,
        "correct": extracted == probe.value,
    }
