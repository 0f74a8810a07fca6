"""One claim's change between a baseline and the candidate, and how `compare` prints it: the relative change,
its bootstrap interval where both sides have repeats, better or worse by the claim's own direction, and the
texts of the change table (docs/compare-and-report.md, "The change table").

A change prints at 0.1% precision; one that rounds to zero there reads `0.0% (same)`: never `-0.0%`, and
never better or worse for a difference the table does not show.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from loadproof.metrics.ab import LEVEL, percentile_interval, relative_change
from loadproof.plans.ab import DEFAULT_RESAMPLES

HIGHER, LOWER, NEITHER = "higher", "lower", "neither"


def bootstrap_change_ci(
    base: Sequence[float],
    cand: Sequence[float],
    rng: random.Random,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = LEVEL,
) -> tuple[float, float] | None:
    """Percentile interval of (mean cand - mean base) / mean base, each side resampled with replacement.

    None unless both sides hold at least 2 values (one value says nothing about its own spread).
    """
    if len(base) < 2 or len(cand) < 2:
        return None
    stats = []
    for _ in range(resamples):
        b = [base[rng.randrange(len(base))] for _ in base]
        c = [cand[rng.randrange(len(cand))] for _ in cand]
        change = relative_change(sum(b) / len(b), sum(c) / len(c))
        if change is not None:
            stats.append(change)
    return percentile_interval(stats, level) if stats else None


@dataclass(frozen=True)
class Change:
    name: str
    direction: str  # higher | lower | neither: the claim's own
    budget: str | None  # throughput | latency when a budget applies to it
    base: float
    cand: float
    change: float | None  # (cand - base) / base; None when base == 0
    ci: tuple[float, float] | None
    n_base: int
    n_cand: int

    @property
    def significant(self) -> bool | None:
        return None if self.ci is None else (self.ci[0] > 0 or self.ci[1] < 0)

    @property
    def judgement(self) -> str:
        """better or worse, by the claim's direction; empty for a claim that states none, and for a change
        that reads 0.0% (`same`, below): a difference the table does not print is not judged."""
        diff = self.cand - self.base
        if self.direction == NEITHER or diff == 0 or self.same:
            return ""
        return "better" if (diff > 0) == (self.direction == HIGHER) else "worse"

    @property
    def same(self) -> bool:
        """The change rounds to 0.0%, the precision it is printed at (a mean over repeats that differs in its
        last bits, or by less than 0.05%)."""
        return self.change is not None and percent(self.change) == ZERO


def figure_text(value: float, like: str | None = None) -> str:
    """`value` printed as `like` (the claim's printed figure) is: as many decimals, or whole."""
    if like is not None and "." in like:
        return f"{value:.{len(like.split('.', 1)[1])}f}"
    if like is not None and float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}"


ZERO = "0.0%"


def percent(change: float) -> str:
    """+12.5%, -3.0%; a change that rounds to zero at this precision is 0.0%, never -0.0% or +0.0%."""
    text = f"{change:+.1%}"
    return ZERO if text[1:] == ZERO else text


def change_text(ch: Change) -> str:
    if ch.change is None:
        return "no change (0)" if ch.cand == ch.base else "from 0" + (f" ({ch.judgement})" if ch.judgement else "")
    if ch.same:
        return f"{ZERO} (same)"
    return percent(ch.change) + (f" ({ch.judgement})" if ch.judgement else "")


def ci_text(ch: Change) -> str:
    if ch.ci is None:
        return "n/a (one value on a side)" if min(ch.n_base, ch.n_cand) < 2 else "n/a (baseline 0)"
    return f"[{percent(ch.ci[0])}, {percent(ch.ci[1])}]" + (" significant" if ch.significant else " not significant")
