"""One claim's change between a baseline and the candidate, and how `compare` prints it: the relative change,
its 95% interval (across runs: a bootstrap over repeats where both sides have them; within runs: the two single
runs' own intervals combined, `metrics.difference`), better or worse by the claim's own direction, and the texts
of the change table (docs/compare-and-report.md, "The change table").

A change prints at 0.1% precision; one that rounds to zero there reads `0.0% (same)`: never `-0.0%`, and
never better or worse for a difference the table does not show. A change whose interval holds 0 is `not
distinguishable`: never better or worse either.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from loadproof.metrics.ab import LEVEL, percentile_interval, relative_change
from loadproof.plans.ab import DEFAULT_RESAMPLES

HIGHER, LOWER, NEITHER = "higher", "lower", "neither"
# where a change's interval comes from
ACROSS_RUNS = "across runs"  # a bootstrap over the repeats of both sides
WITHIN_RUNS = "within runs"  # one run a side: each run's own interval of the figure, combined (MOVER)


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
    ci: tuple[float, float] | None  # the relative change's interval
    n_base: int
    n_cand: int
    basis: str | None = None  # ACROSS_RUNS | WITHIN_RUNS where `ci` is set
    diff_ci: tuple[float, float] | None = None  # cand - base's own interval, in the claim's unit (within runs)
    missing: str | None = None  # why there is no interval, where there is none

    @property
    def distinguishable(self) -> bool | None:
        """The interval excludes 0; None without an interval."""
        return None if self.ci is None else (self.ci[0] > 0 or self.ci[1] < 0)

    @property
    def judgement(self) -> str:
        """better or worse, by the claim's direction; empty for a claim that states none, for a change
        that reads 0.0% (`same`, below): a difference the table does not print is not judged, and for one
        whose interval holds 0: a difference the runs cannot tell from noise is not judged either."""
        diff = self.cand - self.base
        if self.direction == NEITHER or diff == 0 or self.same or self.distinguishable is False:
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


NOT_DISTINGUISHABLE = "not distinguishable"


def change_text(ch: Change) -> str:
    if ch.change is None:
        return "no change (0)" if ch.cand == ch.base else "from 0" + (f" ({ch.judgement})" if ch.judgement else "")
    if ch.same:
        return f"{ZERO} (same)"
    if ch.distinguishable is False:
        return f"{percent(ch.change)} ({NOT_DISTINGUISHABLE})"
    return percent(ch.change) + (f" ({ch.judgement})" if ch.judgement else "")


def ci_text(ch: Change) -> str:
    """The relative change's interval, `[-15.0%, -9.1%]`, or why there is none (`n/a (...)`)."""
    if ch.ci is None:
        return f"n/a ({ch.missing})" if ch.missing else "n/a"
    return f"[{percent(ch.ci[0])}, {percent(ch.ci[1])}]"


def sentence(
    ch: Change, cand: str = "", base: str = "", like: str | None = None, units: bool = False, why: bool = True
) -> str:
    """The change in words. With an interval that excludes 0: `the candidate is 12.3% lower than B1 [-15.0%,
    -9.1%] (better)` (`cand` and `base` name the sides, or are left out); with one that holds 0: `not
    distinguishable: +1.2% [-3.4%, +5.9%]`; `units` adds the difference in the claim's unit and its interval
    where known, printed as `like`. Without an interval: the change as the table prints it, and (`why`) why
    there is none."""
    if ch.ci is None or ch.change is None:
        text = change_text(ch)
        return f"{text}; {ch.missing}" if why and ch.missing and not ch.same else text
    interval = ci_text(ch)
    if ch.same:  # under 0.05%: the interval says whether even that is told apart
        return f"{'' if ch.distinguishable else NOT_DISTINGUISHABLE + ': '}{ZERO} {interval}"
    if units and ch.diff_ci is not None:
        low, high = (figure_text(v, like) for v in ch.diff_ci)
        diff = ch.cand - ch.base
        interval += f"; {'+' if diff > 0 else ''}{figure_text(diff, like)} [{low}, {high}]"
    if not ch.distinguishable:
        return f"{NOT_DISTINGUISHABLE}: {percent(ch.change)} {interval}"
    way = "higher" if ch.change > 0 else "lower"
    than = f" than {base}" if base else ""
    judged = f" ({ch.judgement})" if ch.judgement else ""
    return f"{cand + ' is ' if cand else ''}{abs(ch.change):.1%} {way}{than} {interval}{judged}"
