"""What the console reads of a run's live status (`scenarios.live`): a `Snapshot` as of one moment, the
`Phase`s the scenario declared, and each measured window's figures. The views (`scenarios.live_views`)
turn a snapshot into text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S as NS

PREPARING, COLD, WINDOW, DRAIN, REQUESTS, END = "preparing", "cold", "window", "drain", "requests", "end"


@dataclass(frozen=True)
class Phase:
    """One phase of a run, as the scenario declared it."""

    name: str
    kind: str
    start_ns: int
    detail: str = ""
    end_ns: int | None = None  # a window's planned end; a countdown's end for `requests` (soak's duration)
    records: tuple[RequestRecord, ...] = ()  # a window's streams
    declared_ns: int = 0  # when the scenario declared it (a window can start in the past)


@dataclass(frozen=True)
class WindowFigures:
    elapsed_s: float
    left_s: float | None  # None: the window ends on an event, not a clock (interference's newcomer prefill)
    streams: int
    per_stream: tuple[float, float, float] | None  # min, median, max
    together: float | None
    unit: str  # tokens/s (the server's per-chunk usage) or chunks/s (a server without it)


@dataclass(frozen=True)
class Snapshot:
    """Everything the views show, as of `t_ns`."""

    t_ns: int
    scenario: str
    phases: tuple[Phase, ...]
    detail: str
    planned: int
    sent: int
    done: int
    errors: int
    cancelled: int
    first_tokens: int
    waiting_first_s: float | None  # the longest a request in flight has waited for its first token
    rate: float | None
    rate_unit: str
    ttft_p50_s: float | None
    ttft_count: int
    engine: dict[str, float] | None
    engine_baseline: dict[str, float]
    engine_age_s: float | None
    sessions: int
    prompt_tokens_planned: int
    kv_cache_tokens: int | None
    windows: dict[int, WindowFigures] = field(default_factory=dict)
    engine_samples: Sequence[EngineSample] = ()
    prompt_counter_moved_ns: int = 0  # the first sample showing the engine's prompt-token counter at its value
    last_first_token_ns: int = 0
    tpot_p50_s: float | None = None  # median over the ended requests of their time per output token (mean ITL)

    def engine_at(self, t_ns: int) -> dict[str, float] | None:
        """The engine's values in the last sample taken at or before `t_ns`."""
        samples = self.engine_samples
        for i in range(len(samples) - 1, -1, -1):  # from the end: a phase that just ended is near it
            if samples[i].t_ns <= t_ns:
                return samples[i].values
        return None

    @property
    def phase(self) -> Phase:
        return self.phases[-1]

    def growth(self, name: str) -> float | None:
        """How much an engine counter grew since the scenario started watching."""
        if self.engine is None or name not in self.engine or name not in self.engine_baseline:
            return None
        return self.engine[name] - self.engine_baseline[name]

    def kv_estimate(self) -> float | None:
        """Tokens the KV cache holds beyond its state when watching began: KV usage x the engine's KV size."""
        if not self.kv_cache_tokens:
            return None
        grown = self.growth("kv_cache_usage_perc")
        return None if grown is None else max(0.0, grown) * self.kv_cache_tokens

    def eta(self, index: int | None = None) -> tuple[float | None, str]:
        """Seconds left in a cold phase, and what the estimate is from: the pace of the prompt tokens the
        engine completed so far, else of the KV estimate, else of first tokens. The pace is taken up to
        when the figure last moved, so between two completions the ETA counts down."""
        start = self.phases[-1 if index is None else index].start_ns
        choices = (
            (
                self.growth("prompt_tokens_total"),
                self.prompt_counter_moved_ns,
                self.prompt_tokens_planned,
                "completed prompt tokens",
            ),
            (self.kv_estimate(), self.t_ns, self.prompt_tokens_planned, "the KV estimate"),
            (self.first_tokens, self.last_first_token_ns, self.sessions, "first tokens"),
        )
        for done, at, total, source in choices:
            if done and total and done > 0 and at > start:
                return max(0.0, ((at - start) * (total - done) / done - (self.t_ns - at)) / NS), source
        return None, ""
