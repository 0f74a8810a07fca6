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
  10%, the success share may fall 1 percentage point. No tail by default: a p99's interval needs 368 values
  (`intervals.min_count`), more than a short CI run has; a budget on `ttft_p99` asks for it.
- **The success share** (`success`, `<scenario>.success_pct`): the share of the run's requests that succeeded,
  100 x (`<scenario>.requests` - `<scenario>.failed_requests`) / `<scenario>.requests`, with the Wilson interval
  of those counts (`uncertainty.share_interval`), derived here from the two counts every load-like run (and an
  imported run that states them) publishes, so a baseline stored before this figure existed has it too. Its
  budget is in percentage points (`success=-1pp`: `pp`, an absolute change; a share's relative change means
  little near 100%), and it is always checked (`with_success`: `SUCCESS_BUDGET` is added to budgets that do not
  name it, and left out where neither run has the counts): a run's latencies are of its successful requests
  only, so without it a run whose requests mostly failed could pass on the few that did not.
- **A run that measured nothing** (it sent no request, or none succeeded: `nothing_measured`) fails the gate
  whatever its baseline says, with that reason first.

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
from loadproof.metrics.uncertainty import share_interval

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
    "success": ("success_pct", DOWN),  # derived from the counts: `success_figure`
}
SUCCESS, SUCCESS_PCT, REQUESTS, FAILED = "success", "success_pct", "requests", "failed_requests"
SUCCESS_BUDGET = "success=-1pp"
DEFAULT_BUDGETS = "ttft_p50=+10%,itl_p50=+10%,output_tokens_per_s=-10%," + SUCCESS_BUDGET
POINTS = "pp"  # a budget in percentage points: an absolute change of a figure in %

_VALUE = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(%|pp)?$")
_CLAIM = re.compile(r"^[A-Za-z0-9_<>.:/-]+$")


class GateInputError(ValueError):
    """A budget that does not parse, names no figure, or names a claim neither run has: bad input."""


@dataclass(frozen=True)
class Budget:
    """How far `figure` may move in its bad direction (`bad`, UP or DOWN): `limit`, a share of the baseline, or with
    `points` an absolute change in percentage points of a figure in %."""

    figure: str  # as given: a short name of FIGURES or a whole claim name
    bad: int
    limit: float  # >= 0, a fraction: 0.10 is 10%; with `points`, in percentage points: 1.0 is 1 pp
    points: bool = False
    given: bool = True  # False: added by the gate (SUCCESS_BUDGET), left out where neither run has its figure

    def claim(self, scenario: str) -> str:
        """The claim this budget holds in a run of `scenario`."""
        known = FIGURES.get(self.figure)
        return f"{scenario}.{known[0]}" if known is not None else self.figure

    @property
    def text(self) -> str:
        """`+10%`, `-5%`, `-1pp`: the budget as it is written."""
        sign = "+" if self.bad == UP else "-"
        return f"{sign}{self.limit:g}{POINTS}" if self.points else f"{sign}{self.limit * 100:g}%"

    @property
    def is_success(self) -> bool:
        return self.figure == SUCCESS or self.figure.endswith(f".{SUCCESS_PCT}")


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
    nothing: str | None = None  # why the run measured nothing (`nothing_measured`): a failure whatever the checks

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.decision == FAIL or (c.decision == MISSING and self.missing == "fail")]

    @property
    def judged(self) -> list[Check]:
        return [c for c in self.checks if c.decision != MISSING]

    @property
    def passed(self) -> bool:
        return self.nothing is None and not self.failures and bool(self.judged)

    @property
    def verdict(self) -> str:
        return PASS if self.passed else FAIL


def parse_budgets(text: str, given: bool = True) -> list[Budget]:
    """`ttft_p99=+10%,itl_p50=+5%,success=-1pp` as budgets; GateInputError naming what is wrong."""
    budgets: list[Budget] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not name or not value:
            raise GateInputError(f"a budget is FIGURE=+PCT% or FIGURE=-PCT%, e.g. ttft_p99=+10% (got {item!r})")
        match = _VALUE.match(value)
        if match is None or not math.isfinite(float(match.group(2))):
            raise GateInputError(f"budget {name}: {value!r} is not a percentage such as +10% or -5%, or -1pp")
        points = match.group(3) == POINTS
        sign, limit = match.group(1), float(match.group(2)) / (1 if points else 100)
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
        budgets.append(Budget(name, bad, limit, points, given))
    if not budgets:
        raise GateInputError(f"no budget in {text!r}: give FIGURE=+PCT%, e.g. ttft_p99=+10%")
    return budgets


def with_success(budgets: Sequence[Budget]) -> list[Budget]:
    """`budgets` and, unless one of them holds the success share, SUCCESS_BUDGET (left out where neither run has
    the counts): failed requests are always counted."""
    if any(b.is_success for b in budgets):
        return list(budgets)
    return [*budgets, *parse_budgets(SUCCESS_BUDGET, given=False)]


def success_figure(figures: Mapping[str, Figure], scenario: str) -> Figure | None:
    """The run's success share in % with its Wilson interval, from `<scenario>.requests` and
    `<scenario>.failed_requests`; None without both, or of no request."""
    requests, failed = figures.get(f"{scenario}.{REQUESTS}"), figures.get(f"{scenario}.{FAILED}")
    if requests is None or failed is None:
        return None
    n, bad = round(requests.value), round(failed.value)
    if n < 1 or not 0 <= bad <= n:
        return None
    return Figure(100.0 * (n - bad) / n, "%", share_interval(n - bad, n))


def with_derived(figures: Mapping[str, Figure], scenario: str) -> dict[str, Figure]:
    """`figures` and the success share (`<scenario>.success_pct`) where the counts give it."""
    out = dict(figures)
    success = success_figure(figures, scenario)
    if success is not None:
        out.setdefault(f"{scenario}.{SUCCESS_PCT}", success)
    return out


def nothing_measured(run: Mapping[str, Figure], scenario: str) -> str | None:
    """Why a run measured nothing (it sent no request, or none succeeded), or None: it did, or it has no count of
    its requests to tell."""
    requests = run.get(f"{scenario}.{REQUESTS}")
    if requests is None:
        return None
    n = round(requests.value)
    if n < 1:
        return "the run measured nothing: it sent no request"
    failed = run.get(f"{scenario}.{FAILED}")
    if failed is not None and round(failed.value) >= n:
        return f"the run measured nothing: none of its {n} requests succeeded"
    return None


def check(budget: Budget, claim: str, base: Figure | None, run: Figure | None) -> Check:
    """One figure against its budget, by the rule of this module's docstring."""
    lacking = [who for who, fig in (("the baseline", base), ("the run", run)) if fig is None]
    if lacking:
        return Check(budget, claim, base, run, None, None, MISSING, f"not in {' and '.join(lacking)}")
    assert base is not None and run is not None
    if budget.points:  # an absolute change, in percentage points
        change: float | None = run.value - base.value
    else:
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
    if budget.points:
        low, high = diff.low, diff.high
    else:
        low, high = sorted((diff.low / base.value, diff.high / base.value))  # as (run - base) / base, sign and all
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
    """Every budget checked on the claims of a baseline and a run of `scenario` (claim name -> Figure), the success
    share derived from the counts (`with_derived`); a run that measured nothing fails whatever the checks say.

    A budget on a claim neither run has is a GateInputError, unless `defaults` (DEFAULT_BUDGETS, given by no one)
    or the budget was not given (`with_success`): then it is left out, and none left is the error. A budget in
    percentage points on a figure not in % is a GateInputError."""
    if missing not in MISSING_POLICIES:
        raise GateInputError(f"--missing is one of {', '.join(MISSING_POLICIES)} (got {missing!r})")
    base, run = with_derived(base, scenario), with_derived(run, scenario)
    checks = []
    for budget in budgets:
        claim = budget.claim(scenario)
        if claim not in base and claim not in run:
            if defaults or not budget.given:
                continue
            has = "it" if claim == budget.figure else claim
            raise GateInputError(f"budget {budget.figure}: neither run has {has} (a {scenario} run)")
        units = {fig.unit for fig in (base.get(claim), run.get(claim)) if fig is not None}
        if budget.points and units != {"%"}:
            raise GateInputError(
                f"budget {budget.figure}={budget.text}: percentage points are for a figure in %; {claim} is in "
                f"{', '.join(sorted(u or 'no unit' for u in units))}: give its budget in % of the baseline"
            )
        checks.append(check(budget, claim, base.get(claim), run.get(claim)))
    if not checks:
        raise GateInputError(
            f"no default budget applies to a {scenario} run ({DEFAULT_BUDGETS}): give --budget with its claims' "
            f"names, e.g. --budget {scenario}.<claim>=+10%"
        )
    return Decision(checks, missing, nothing_measured(run, scenario))


__all__ = [
    "DEFAULT_BUDGETS",
    "DOWN",
    "FAIL",
    "FIGURES",
    "MISSING",
    "MISSING_POLICIES",
    "PASS",
    "POINTS",
    "SUCCESS",
    "SUCCESS_BUDGET",
    "UNDECIDED",
    "UP",
    "Budget",
    "Check",
    "Decision",
    "Figure",
    "GateInputError",
    "check",
    "decide",
    "nothing_measured",
    "parse_budgets",
    "success_figure",
    "with_derived",
    "with_success",
]
