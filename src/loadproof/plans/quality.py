"""The quality plan: the suites asked, each with its data file (and sha256), prompt style and budget;
with `--under-load-rate`, the open-loop load every item was asked beside a second time.

A suite not asked has no entry (the JSON omits it, as before plans were typed)."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.plans import Plan
from loadproof.plans.load import LoadPlan


class Gsm8kPlan(msgspec.Struct, kw_only=True):
    file: str
    sha256: str
    items: int
    prompt: str
    max_tokens: int


class AuthoredPlan(msgspec.Struct, kw_only=True):
    file: str
    sha256: str
    tasks: int
    modes: dict[str, str]  # mode -> "asked" or "skipped: <reason>"
    max_tokens: int


class RetrievalPlan(msgspec.Struct, kw_only=True, omit_defaults=True):
    lengths: list[int]
    depths: list[float]
    asked_lengths: list[int]
    overhead_tokens: int | None = None
    overhead_source: str | None = None
    salts: dict[str, str] = {}


class ImagePlan(msgspec.Struct, kw_only=True):
    items: int
    status: str


class UnderLoadPlan(msgspec.Struct, kw_only=True):
    """The load beside the second asking (docs/quality.md, "Under load"): drawn for `max_s` seconds
    (`drawn_requests`), cut where the last under-load item ended; `load` is the load scenario's plan of
    what was sent, its `planned_requests` the requests the schedule released before the cut."""

    rate_rps: float
    max_s: float
    drawn_requests: int
    load: LoadPlan


class QualityPlan(Plan, kw_only=True, omit_defaults=True):
    suites: list[str]
    endpoint: str
    max_model_len: int | None
    gsm8k: Gsm8kPlan | None = None
    authored: AuthoredPlan | None = None
    retrieval: RetrievalPlan | None = None
    image: ImagePlan | None = None
    under_load: UnderLoadPlan | None = None
    num_items: int
    num_skipped: int

    def workload(self) -> dict[str, Any]:
        return {
            "suites": self.suites,
            "gsm8k items": self.gsm8k.items if self.gsm8k else None,
            "authored modes": sorted(self.authored.modes) if self.authored else None,
            "retrieval lengths": self.retrieval.lengths if self.retrieval else None,
            **({"under load rps": self.under_load.rate_rps} if self.under_load else {}),
        }
