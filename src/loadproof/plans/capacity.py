"""The capacity plan: N sessions of L tokens, the window W, the bounds the criteria use, each session's
request id and planted fact, and the engine's own figures at planning time. Written by
`scenarios/capacity.py` (and by the simulator's prediction), read by `metrics/capacity.py`."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.plans import Plan


class CapacitySession(msgspec.Struct, kw_only=True):
    request_id: str
    session_id: str
    salt: str = ""
    key: str = ""  # the planted fact's subject (`session 417`)
    expected: str  # the planted value the answer must state
    planted: bool = True  # False in a negative control: the fact asked about was never planted
    probe_depths: list[float] = []


class CapacityPlan(Plan, kw_only=True):
    sessions: list[CapacitySession]
    input_tokens: int
    max_tokens: int | None = None
    window_s: float
    max_gap_s: float
    drain_timeout_s: float
    idle_timeout_s: float | None = None  # runs made since the idle guard; its criterion needs it
    kv_idle_bound: float
    check_probes: bool = True
    max_model_len: int | None = None
    engine_kv_cache_tokens: int | None = None
    theoretical_full_windows: float | None = None
    overhead_tokens: int | None = None
    overhead_source: str | None = None
    haystack_additive: bool | None = None

    def workload(self) -> dict[str, Any]:
        return {
            "sessions": len(self.sessions),
            "input_tokens": self.input_tokens,
            "window_s": self.window_s,
            "negative control": not all(s.planted for s in self.sessions),
        }
