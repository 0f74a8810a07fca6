"""The CI gate's decision (`loadproof gate RUN --baseline ...`; docs/ci-gate.md): a run against its baseline, one
budgeted figure at a time, each figure's change with its 95% interval, judged against how far it may move.

- **A budget** says how far a figure may move in its bad direction: `ttft_p99=+10%` may rise by 10% of the
  baseline, `output_tokens_per_s=-5%` may fall by 5%. A figure is a short name (`FIGURES`: a latency
  `<ttft|itl|tpot|e2el>_<p50|p90|p95|p99|mean>`, `output_tokens_per_s`, `request_throughput_rps`, `goodput_rps`,
  `attainment`, `steady_output_tokens_per_s`), the claim `<scenario>.<its claim>` of the run's scenario, whose
  bad direction is known (a latency's is up, a rate's down; a sign against it is refused), or a whole claim name
  (`load.model.base.ttft_s.p50=+10%`), whose sign must be given: `+` it may rise by that much, `-` fall.
- **The change** is (run - baseline) / baseline; its interval is the difference's from the two runs' own
  intervals (`metrics.difference.mover_difference`, MOVER), as a share of the baseline: what `loadproof compare`
  computes on one run a side (report/compare.py, `change_of`).
- **The rule**: a figure FAILs only when its change's whole 95% interval lies past the budget in the bad
  direction, that is when the interval's bound nearest no change is itself past the budget. Then the runs say,
  at 97.5% one-sided, that the figure moved further than its budget allows: the change is real (its interval
  excludes 0) and it is past the budget, not only at its value. Why the whole interval, not `compare
  --max-slowdown`'s "excludes 0 and past the budget at its value": a gate runs unattended on every change, and a
  gate that fails on noise is soon ignored; and the intervals within runs cover each run's own sampling, not the
  machine's drift between two runs (report/compare.py, DRIFT_NOTE), so the gate asks for the stronger evidence.
  A change past its budget at its value whose interval reaches back within it is UNDECIDED: printed with its
  interval (a longer run narrows it), never a failure. Otherwise the figure PASSes: not distinguishable (the
  interval holds 0), better, or worse within its budget.
- **A figure the gate cannot judge** is MISSING, with why: absent from one run, no interval in one run (a p99 of
  fewer than 368 values has none), intervals at different confidences, a baseline of 0. `missing="fail"` (the
  default) fails the gate on it: a figure the gate was asked to hold and could not check is not a pass.
  `missing="pass"` reports it and lets the others decide, but a gate that judged no figure at all still fails.
  A budget on a claim neither run has is bad input (`GateInputError`), except a default one, which is left out.
- `DEFAULT_BUDGETS`, when none are given: the medians of TTFT and ITL may rise 10%, output throughput may fall
  10%. No tail by default: a p99's interval needs 368 values (`intervals.min_count`), more than a short CI run
  has; a budget on `ttft_p99` asks for it.

Standard library and msgspec only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loadproof.metrics.difference import mover_difference
from loadproof.metrics.intervals import Interval
from loadproof.metrics.precision import LATENCIES, STATS

UP, DOWN = 1, -1  # the bad direction of a figure: a latency's up, a rate's down
PASS, FAIL, UNDECIDED, MISSING = "PASS", "FAIL", "UNDECIDED", "MISSING"
MISSING_POLICIES = ("fail", "pass")

# short name -> (the claim's name after `<scenario>.`, its bad direction)
FIGURES: dict[str, tuple[str, int]] = {
    **{f"{latency}_{stat}": (f"{claim}.{stat}", UP) for latency, claim in LATENCIES.items() for stat in STATS},
    "output_tokens_per_s": ("output_tokens_per_s", DOWN),
    "request_throughput_rps": ("request_throughput_rps", DOWN),
    "goodput_rps": ("goodput_rps", DOWN),
    "attainment": ("slo_attainment_pct", DOWN),
    "steady_output_tokens_per_s": ("steady.output_tokens_per_s", DOWN),
}
DEFAULT_BUDGETS = "ttft_p50=+10%,itl_p50=+10%,output_tokens_per_s=-10%"

_VALUE = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)%?$")
_CLAIM = re.compile(r"^[A-Za-z0-9_<>.:/-]+$")


class GateInputError(ValueError):
    """A budget that does not parse, names no figure, or names a claim neither run has: bad input."""


@dataclass(frozen=True)
class Budget:
    """How far `figure` may move in its bad direction (`bad`, UP or DOWN): `limit`, a share of the baseline."""

    figure: str  # as given: a short name of FIGURES or a whole claim name
    bad: int
    limit: float  # >= 0, a fraction: 0.10 is 10%

    def claim(self, scenario: str) -> str:
        """The claim this budget holds in a run of `scenario`."""
        known = FIGURES.get(self.figure)
        return f"{scenario}.{known[0]}" if known is not None else self.figure

    @property
    def text(self) -> str:
        """`+10%`, `-5%`: the budget as it is written."""
        return f"{'+' if self.bad == UP else '-'}{self.limit * 100:g}%"


@dataclass(frozen=True)
class Figure:
    """One run's value of a claim, its unit and its interval (None: it has none)."""

    value: float
    unit: str = ""
    interval: Interval | None = None


@dataclass(frozen=True)
class Check:
    """One budgeted figure judged: both runs' values, the change and its interval, the decision and why."""

    budget: Budget
    claim: str
    base: Figure | None
    run: Figure | None
    change: float | None  # (run - base) / base
    interval: tuple[float, float] | None  # the relative change's 95% interval
    decision: str  # PASS, FAIL, UNDECIDED or MISSING
    reason: str


@dataclass(frozen=True)
class Decision:
    """The gate's verdict over every check; `failures` are the checks that make it FAIL."""

    checks: list[Check]
    missing: str  # the policy: fail or pass

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.decision == FAIL or (c.decision == MISSING and self.missing == "fail")]

    @property
    def judged(self) -> list[Check]:
        return [c for c in self.checks if c.decision != MISSING]

    @property
    def passed(self) -> bool:
        return not self.failures and bool(self.judged)

    @property
    def verdict(self) -> str:
        return PASS if self.passed else FAIL


def parse_budgets(text: str) -> list[Budget]:
    """`ttft_p99=+10%,itl_p50=+5%,output_tokens_per_s=-5%` as budgets; GateInputError naming what is wrong."""
    budgets: list[Budget] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not name or not value:
            raise GateInputError(f"a budget is FIGURE=+PCT% or FIGURE=-PCT%, e.g. ttft_p99=+10% (got {item!r})")
        match = _VALUE.match(value)
        if match is None or not math.isfinite(float(match.group(2))):
            raise GateInputError(f"budget {name}: {value!r} is not a percentage such as +10% or -5%")
        sign, limit = match.group(1), float(match.group(2)) / 100
        known = FIGURES.get(name)
        if known is not None:
            bad = known[1]
            if sign and (UP if sign == "+" else DOWN) != bad:
                way, allowed = ("rise", "+") if bad == UP else ("fall", "-")
                raise GateInputError(
                    f"budget {name}={value}: {name} gets worse as it {way}s; its budget is how far it may {way}: "
                    f"{name}={allowed}{match.group(2)}%"
                )
        elif "." in name and _CLAIM.match(name):
            if not sign:
                raise GateInputError(
                    f"budget {name}={value}: a claim's budget needs its sign, + (it may rise by that much) or - "
                    f"(it may fall)"
                )
            bad = UP if sign == "+" else DOWN
        else:
            raise GateInputError(
                f"unknown budget figure {name!r}: one of {', '.join(FIGURES)}, or a claim's whole name "
                f"(load.ttft_s.p99)"
            )
        if any(b.figure == name for b in budgets):
            raise GateInputError(f"budget {name} given twice")
        budgets.append(Budget(name, bad, limit))
    if not budgets:
        raise GateInputError(f"no budget in {text!r}: give FIGURE=+PCT%, e.g. ttft_p99=+10%")
    return budgets


def check(budget: Budget, claim: str, base: Figure | None, run: Figure | None) -> Check:
    """One figure against its budget, by the rule of this module's docstring."""
    lacking = [who for who, fig in (("the baseline", base), ("the run", run)) if fig is None]
    if lacking:
        return Check(budget, claim, base, run, None, None, MISSING, f"not in {' and '.join(lacking)}")
    assert base is not None and run is not None
    change = None if base.value == 0 else (run.value - base.value) / base.value
    lacking = [who for who, fig in (("the baseline", base), ("the run", run)) if fig.interval is None]
    if lacking:
        why = "no interval in " + ("either run" if len(lacking) == 2 else lacking[0])
        return Check(budget, claim, base, run, change, None, MISSING, why)
    assert base.interval is not None and run.interval is not None
    diff = mover_difference(base.value, base.interval, run.value, run.interval)
    if diff is None:
        return Check(budget, claim, base, run, change, None, MISSING, "intervals at different confidences")
    if change is None:
        return Check(budget, claim, base, run, change, None, MISSING, "a baseline of 0 (no relative change)")
    low, high = sorted((diff.low / base.value, diff.high / base.value))  # as (run - base) / base is, sign and all
    worse_low, worse_high = sorted((budget.bad * low, budget.bad * high))  # in the bad direction
    worse = budget.bad * change
    tol = 1e-12
    if worse_low > budget.limit + tol:
        decision, reason = FAIL, f"its whole interval is past its {budget.text} budget"
    elif worse > budget.limit + tol:
        decision, reason = UNDECIDED, "past its budget at its value, but its interval reaches back within it"
    elif worse_low <= 0 <= worse_high:
        decision, reason = PASS, "not distinguishable (its interval holds 0)"
    elif worse < 0:
        decision, reason = PASS, "better"
    else:
        decision, reason = PASS, "worse, within its budget"
    return Check(budget, claim, base, run, change, (low, high), decision, reason)


def decide(
    base: Mapping[str, Figure],
    run: Mapping[str, Figure],
    scenario: str,
    budgets: Sequence[Budget],
    *,
    defaults: bool = False,
    missing: str = "fail",
) -> Decision:
    """Every budget checked on the claims of a baseline and a run of `scenario` (claim name -> Figure).

    A budget on a claim neither run has is a GateInputError, unless `defaults` (DEFAULT_BUDGETS, given by no one):
    then it is left out, and none left is the error."""
    if missing not in MISSING_POLICIES:
        raise GateInputError(f"--missing is one of {', '.join(MISSING_POLICIES)} (got {missing!r})")
    checks = []
    for budget in budgets:
        claim = budget.claim(scenario)
        if claim not in base and claim not in run:
            if defaults:
                continue
            has = "it" if claim == budget.figure else claim
            raise GateInputError(f"budget {budget.figure}: neither run has {has} (a {scenario} run)")
        checks.append(check(budget, claim, base.get(claim), run.get(claim)))
    if not checks:
        raise GateInputError(
            f"no default budget applies to a {scenario} run ({DEFAULT_BUDGETS}): give --budget with its claims' "
            f"names, e.g. --budget {scenario}.<claim>=+10%"
        )
    return Decision(checks, missing)


__all__ = [
    "DEFAULT_BUDGETS",
    "DOWN",
    "FAIL",
    "FIGURES",
    "MISSING",
    "MISSING_POLICIES",
    "PASS",
    "UNDECIDED",
    "UP",
    "Budget",
    "Check",
    "Decision",
    "Figure",
    "GateInputError",
    "check",
    "decide",
    "parse_budgets",
]
