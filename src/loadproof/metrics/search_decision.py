"""How a rate search decides a rate (a level) on SLO attainment (docs/scenarios.md, "load", the search).

Two rules, named in search.json's `decision` and a bundle's series entry:

- `interval` (the default since #41): a level is the requests of every segment run at that rate, pooled
  (good requests and all requests summed). Its attainment's 95% Wilson interval (`share_interval`) decides:
  PASS when the lower bound is at or above the target, FAIL when the upper bound is below it, UNDECIDED while
  the interval straddles it. An undecided level gets another segment at the same rate (the search's
  `--search-segments` budget); a level still undecided when the budget is spent stays UNDECIDED and does not
  pass. A level with a client-limited segment fails (a rate the client could not offer proves nothing about
  the server), as does one with no request recorded.
- `point` (searches written before #41): each trial its own level, passing when its attainment's value
  reaches the target (`load_series.trial_verdict`).

Standard library and msgspec only: `verify` recomputes every decision from the trials' claims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from loadproof.metrics.intervals import Interval, wilson_interval
from loadproof.metrics.uncertainty import CONFIDENCE, share_interval

Rule = Literal["interval", "point"]
RULES: tuple[str, ...] = ("interval", "point")
INTERVAL: Rule = "interval"
POINT: Rule = "point"  # what a search.json or bundle entry that names no rule was decided on
Decision = Literal["pass", "fail", "undecided"]
MAX_COUNT = 10**9  # the most requests min_requests_to_pass looks at


def rule_of(value: object) -> Rule:
    """A stored rule: `interval`, or `point` for anything else (a search written before rules were named)."""
    return INTERVAL if value == INTERVAL else POINT


def decide(good: int, requests: int, attainment: float) -> tuple[Decision, Interval]:
    """A level's decision on `good` of `requests` requests against `attainment` (a share, 0 < A <= 1), and the
    interval (in shares) it was decided on."""
    interval = wilson_interval(good, requests, CONFIDENCE)
    if interval.low >= attainment:
        return "pass", interval
    if interval.high < attainment:
        return "fail", interval
    return "undecided", interval


def min_requests_to_pass(attainment: float) -> int | None:
    """The fewest requests, every one good, whose interval's lower bound reaches `attainment`; None where no
    count does (attainment 1: a lower bound is below 1 whatever the count)."""
    if attainment >= 1:
        return None
    low, high = 1, 1
    while wilson_interval(high, high, CONFIDENCE).low < attainment:
        low, high = high, high * 2
        if high > MAX_COUNT:
            return None
    while low < high:  # the lower bound of n good of n rises with n
        mid = (low + high) // 2
        if wilson_interval(mid, mid, CONFIDENCE).low >= attainment:
            high = mid
        else:
            low = mid + 1
    return high


@dataclass(frozen=True)
class LevelState:
    """A level after one more segment: its decision, why, and the pooled counts it was decided on (None where
    no request was recorded)."""

    decision: Decision
    reason: str
    good: int | None = None
    requests: int | None = None
    interval_pct: Interval | None = None

    @property
    def attainment_pct(self) -> float | None:
        if self.good is None or not self.requests:
            return None
        return 100 * self.good / self.requests

    def fields(self) -> dict[str, Any]:
        """The row fields of a search trial (`rundir.series.SearchTrial`) this state gives."""
        interval = self.interval_pct
        return {
            "passed": self.decision == "pass",
            "reason": self.reason,
            "decision": self.decision,
            "level_good": self.good,
            "level_requests": self.requests,
            "level_attainment_pct": self.attainment_pct,
            "level_attainment_low_pct": interval.low if interval else None,
            "level_attainment_high_pct": interval.high if interval else None,
        }


def _whole(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def level_states(segments: Sequence[Mapping[str, Any]], attainment: float) -> list[LevelState]:
    """The level's state after each of its segments (each a run's figures, `load_series.point_figures`),
    pooled with every segment before it."""
    states = []
    good = requests = 0
    limited = False
    target = f"{attainment * 100:g}%"
    for figures in segments:
        limited = limited or figures.get("client_limited") is True
        seg_good, seg_requests = _whole(figures.get("good_requests")), _whole(figures.get("requests"))
        if figures.get("slo_attainment_pct") is not None and seg_good is not None and seg_requests:
            good, requests = good + seg_good, requests + seg_requests
        if requests == 0:
            states.append(LevelState("fail", "no request recorded"))
            continue
        decision, interval = decide(good, requests, attainment)
        pct = share_interval(good, requests)
        shown = f"SLO met {100 * good / requests:.2f}% [{interval.low * 100:.2f}%, {interval.high * 100:.2f}%] of {requests}"
        if limited:
            states.append(
                LevelState(
                    "fail", f"client-limited (the client could not keep the schedule); {shown}", good, requests, pct
                )
            )
        elif decision == "pass":
            states.append(LevelState(decision, f"{shown}: its lower bound >= {target}", good, requests, pct))
        elif decision == "fail":
            states.append(LevelState(decision, f"{shown}: its upper bound < {target}", good, requests, pct))
        else:
            states.append(LevelState(decision, f"{shown} straddles {target}", good, requests, pct))
    return states


def levels(rates: Sequence[float]) -> list[int]:
    """Each trial's level (0, 1, ...): consecutive trials at one rate are one level's segments."""
    out: list[int] = []
    for i, rate in enumerate(rates):
        out.append(0 if i == 0 else out[-1] + (rate != rates[i - 1]))
    return out


def describe(attainment: float, budget: int) -> str:
    """What a search on intervals decides a rate on, and the fewest requests a pass takes."""
    fewest = min_requests_to_pass(attainment)
    needs = (
        f"a pass takes at least {fewest} requests at a rate, every one meeting the SLO"
        if fewest is not None
        else "no count of requests can pass"
    )
    return (
        f"each rate decided on its SLO attainment's 95% interval: PASS when the lower bound >= "
        f"{attainment * 100:g}%, FAIL when the upper bound < it, and while it straddles, up to {budget} runs at "
        f"that rate pooled (--search-segments), then UNDECIDED, not a pass; {needs}"
    )


def verdict_label(decision: str | None, passed: bool, more: bool = False) -> str:
    """A trial's verdict as the console and the report show it: PASS or FAIL (the point value); on intervals
    also UNDECIDED, and `STRADDLES, more` where its level runs another segment."""
    if decision is None:
        return "PASS" if passed else "FAIL"
    return "STRADDLES, more" if more else decision.upper()


__all__ = [
    "Decision",
    "INTERVAL",
    "LevelState",
    "POINT",
    "RULES",
    "Rule",
    "decide",
    "describe",
    "level_states",
    "levels",
    "min_requests_to_pass",
    "rule_of",
    "verdict_label",
]
