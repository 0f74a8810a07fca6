"""The soak plan: duration, clients, the long-request mix, and the bounds its criteria use."""

from __future__ import annotations

from typing import Any

from loadproof.plans import Plan


class SoakPlan(Plan, kw_only=True):
    duration_s: float
    clients: int
    long_every: int
    long_requests: bool  # whether long requests were sent (they need a tokenizer)
    max_error_rate: float
    max_latency_drift: float
    max_rss_growth_mib: float

    def workload(self) -> dict[str, Any]:
        return {
            "duration_s": self.duration_s,
            "clients": self.clients,
            "long_every": self.long_every if self.long_requests else 0,
        }
