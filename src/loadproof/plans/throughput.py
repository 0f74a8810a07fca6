"""The throughput plan: task families, concurrency levels and the request settings every wave uses.

Version 2. Version 1 runs (before plans were typed) wrote no plan: their resolved options, which the
manifest always holds, stand in for it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from loadproof.plans import Plan
from loadproof.rundir import Manifest


class ThroughputPlan(Plan, kw_only=True):
    version: ClassVar[int] = 2

    families: list[str]
    concurrency: list[int]
    max_tokens: int
    num_prompts: int | None = None  # prompts per family at concurrency 1; None: every prompt
    repeats: int = 1
    temperature: float | None = None
    ignore_eos: bool | None = None
    seed: int | None = None
    slo: dict[str, float] = {}  # --slo: per-request SLOs in seconds, by name (the good tokens)
    # each level's steady window's claims (metrics.steady_state), which every run sets since; False: a run made
    # before them, whose published claims have none
    steady_window: bool = False

    @classmethod
    def upgrade(cls, raw: Any, version: int, manifest: Manifest) -> Any:
        if raw is None and version == 1:
            return manifest.options or None
        return raw

    def workload(self) -> dict[str, Any]:
        return {
            "families": self.families,
            "concurrency": self.concurrency,
            "max_tokens": self.max_tokens,
            "prompts per family": self.num_prompts,
            "temperature": self.temperature,
            "ignore_eos": self.ignore_eos,
        }
