"""The authored task families of the throughput scenario (`loadproof/data/prompts/<family>.jsonl`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from loadproof.errors import UsageError

FAMILIES = ("english", "chinese", "code", "edit")
DEFAULT_FAMILIES = ("english", "chinese", "code")  # throughput's and soak's; `edit` (answers that repeat the
# prompt, where n-gram drafts are accepted) is asked for by name


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str


def load_family(family: str) -> list[Prompt]:
    if family not in FAMILIES:
        raise UsageError(f"unknown task family {family!r}; families: {', '.join(FAMILIES)}")
    path = resources.files("loadproof") / "data" / "prompts" / f"{family}.jsonl"
    prompts = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            prompts.append(Prompt(id=row["id"], text=row["prompt"]))
    return prompts
