"""The prefill plan: L input tokens, and each cold repeat's request id and salt."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.plans import Plan


class PrefillRepeat(msgspec.Struct, kw_only=True):
    request_id: str
    salt: str = ""


class PrefillPlan(Plan, kw_only=True):
    input_tokens: int
    repeats: list[PrefillRepeat]
    overhead_tokens: int | None = None
    overhead_source: str | None = None

    def workload(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens}
