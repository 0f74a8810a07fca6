"""The A/B plan: both arms (target and settings), the seeded order of the arms in every round, the
prompts, and the seed and resample count of the bootstrap interval (so it recomputes offline)."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.plans import Plan

ARMS = ("a", "b")
DEFAULT_RESAMPLES = 2000


class AbArm(msgspec.Struct, kw_only=True):
    target: dict[str, Any]
    settings: dict[str, Any]


class AbPlan(Plan, kw_only=True):
    arms: dict[str, AbArm]
    order: list[list[str]]  # per round, the arms in the order they ran
    order_seed: int
    prompts: list[str]
    family: str
    bootstrap_seed: int
    resamples: int = DEFAULT_RESAMPLES
    labels: dict[str, str] = {}
    slo: dict[str, float] = {}  # --slo: per-request SLOs in seconds, by name (the good tokens)

    def workload(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "prompts": self.prompts,
            **{f"arm {arm} settings": self.arms[arm].settings if arm in self.arms else None for arm in ARMS},
        }
