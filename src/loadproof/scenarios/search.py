"""Capacity search: the largest N (or L) that passes, found with real runs.

Bracketing first (double from the start value while trials pass, up to the maximum), then bisection
between the largest pass and the smallest failure until they are `resolution` apart. Every trial is a
full capacity run recorded in its own run directory; this module only decides what to try next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Trial:
    value: int
    verdict: str
    reason: str
    run_dir: str


@dataclass
class SearchResult:
    parameter: str
    trials: list[Trial] = field(default_factory=list)
    largest_pass: int | None = None
    smallest_fail: int | None = None

    @property
    def summary(self) -> str:
        if self.largest_pass is None:
            return f"no {self.parameter} passed (smallest tried: {self.trials[0].value if self.trials else '-'})"
        bound = f", {self.smallest_fail} fails" if self.smallest_fail is not None else " (the maximum tried)"
        return f"largest passing {self.parameter}: {self.largest_pass}{bound}"


def search(parameter: str, start: int, maximum: int, run_trial: Callable[[int], Trial],
           resolution: int = 1, on_trial: Callable[[Trial], None] | None = None) -> SearchResult:
    if not 1 <= start <= maximum:
        raise ValueError(f"start {start} must lie in [1, {maximum}]")
    result = SearchResult(parameter)

    def attempt(value: int) -> bool:
        trial = run_trial(value)
        result.trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
        return trial.verdict == "PASS"

    value = start
    while True:
        if attempt(value):
            result.largest_pass = value
            if value >= maximum:
                return result
            value = min(value * 2, maximum)
        else:
            result.smallest_fail = value
            break
    low = result.largest_pass or 0
    high = result.smallest_fail
    while high - low > resolution:
        mid = (low + high) // 2
        if mid <= 0 or mid == low:
            break
        if attempt(mid):
            low = result.largest_pass = mid
        else:
            high = result.smallest_fail = mid
    return result
