"""The interference plan: M sessions of L_m tokens, the newcomer of L_big tokens, the window W, and
each session's stream, follow-up and planted fact."""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.plans import Plan


class InterferenceSession(msgspec.Struct, kw_only=True):
    request_id: str
    followup_request_id: str
    session_id: str
    salt: str = ""
    expected: str


class Newcomer(msgspec.Struct, kw_only=True):
    request_id: str
    salt: str = ""


class InterferencePlan(Plan, kw_only=True):
    window_s: float
    session_tokens: int
    newcomer_tokens: int
    check_probes: bool = True
    max_tokens: int | None = None
    sessions: list[InterferenceSession]
    newcomer: Newcomer
    overhead_tokens: int | None = None
    overhead_source: str | None = None
    longest_gap: bool = False  # claims interference.during_longest_gap_s (runs made before it existed do not)

    def workload(self) -> dict[str, Any]:
        return {
            "sessions": len(self.sessions),
            "session_tokens": self.session_tokens,
            "newcomer_tokens": self.newcomer_tokens,
            "window_s": self.window_s,
        }
