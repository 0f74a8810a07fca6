"""`loadproof gate RUN --baseline QUERY|RUN_DIR`: a run held against its baseline in CI (docs/ci-gate.md).

The two sides are read by results/gate_sides.py (a run directory's claims recomputed from its records, as
`compare` does, or the stored run a query selects), the budgets parsed here, and the decision is
`metrics.gate.decide`'s, pure. This module says it: the verdict first, one evidence line per figure, and the
JSON result a CI job keeps.

Bad input is one UsageError line (exit 2): a baseline that matches nothing, a run of another scenario or
workload (`anyway` compares a workload that differs), an unknown budget figure, a malformed budget. A store
query that matches nothing may pass instead (`no_baseline="pass"`: a new store's first run, which has nothing
to be held against), said as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError
from loadproof.metrics.gate import (
    DEFAULT_BUDGETS,
    FAIL,
    MISSING,
    POINTS,
    UNDECIDED,
    UP,
    Budget,
    Check,
    Decision,
    Figure,
    GateInputError,
    decide,
    parse_budgets,
    with_success,
)
from loadproof.plans import workload_difference
from loadproof.report.change import percent
from loadproof.results.gate_sides import GateSide, NoBaseline, baseline_side, side_of_run_dir

RULE = (
    "a figure fails only when its change's whole 95% interval (MOVER of the two runs' own intervals) lies past its "
    "budget in the bad direction"
)
NO_BASELINE_POLICIES = ("fail", "pass")
DRIFT = "the intervals cover each run's own sampling, not drift of the machine between the runs (docs/ci-gate.md)"


@dataclass(frozen=True)
class GateResult:
    run: GateSide
    baseline: GateSide
    query: str  # the --baseline asked
    budgets: list[Budget]
    defaults: bool  # the budgets are DEFAULT_BUDGETS
    decision: Decision
    differences: list[str]  # how the workloads differ, where compared anyway

    @property
    def exit_code(self) -> int:
        return 0 if self.decision.passed else 1


@dataclass(frozen=True)
class Unheld:
    """A run with no baseline to be held against, passed as asked (`--no-baseline pass`)."""

    run: GateSide
    query: str
    reason: str  # the query's own one line: what it matched nothing in
    exit_code: int = 0


def budgets_of(text: str | None) -> tuple[list[Budget], bool]:
    """The budgets asked, or DEFAULT_BUDGETS (and True) when none, with the success share's unless they name it
    (`metrics.gate.with_success`); a malformed one is a UsageError."""
    try:
        return with_success(parse_budgets(DEFAULT_BUDGETS if text is None else text)), text is None
    except GateInputError as exc:
        raise UsageError(f"--budget: {exc}") from None


def gate(
    run_dir: Path,
    baseline: str,
    budget: str | None = None,
    store_url: str | None = None,
    missing: str = "fail",
    anyway: bool = False,
    no_baseline: str = "fail",
) -> GateResult | Unheld:
    """The run at `run_dir` against `baseline` (a run directory, or a query of the store at `store_url`); with
    `no_baseline="pass"` a query that matches no stored run passes, said as such."""
    budgets, defaults = budgets_of(budget)  # a malformed budget before anything is read
    if no_baseline not in NO_BASELINE_POLICIES:
        raise UsageError(f"--no-baseline is one of {', '.join(NO_BASELINE_POLICIES)} (got {no_baseline!r})")
    run = side_of_run_dir(run_dir)
    try:
        base = baseline_side(baseline, run.scenario, run.run_id, store_url)
    except NoBaseline as exc:
        if no_baseline == "fail":
            raise
        return Unheld(run, baseline, str(exc))
    if base.run_id == run.run_id:
        raise UsageError(f"--baseline {baseline}: that is the run itself ({run.run_id}); give an earlier run")
    if base.scenario != run.scenario:
        raise UsageError(
            f"--baseline {baseline}: {base.run_id} is a {base.scenario} run, {run.run_id} a {run.scenario} run"
        )
    differences = workload_difference(base.plan, run.plan) if base.plan is not None and run.plan is not None else []
    if differences and not anyway:
        raise UsageError(
            f"not gated, the workloads differ ({base.run_id} vs {run.run_id}): {', '.join(differences)}; "
            "pass --anyway to gate them anyway"
        )
    try:
        decision = decide(base.figures, run.figures, run.scenario, budgets, defaults=defaults, missing=missing)
    except GateInputError as exc:
        raise UsageError(str(exc)) from None
    return GateResult(run, base, baseline, budgets, defaults, decision, differences)


# --- saying it ----------------------------------------------------------------------------------------------


def number(value: float) -> str:
    return f"{value:.4g}"


def figure_text(fig: Figure | None) -> str:
    """`0.1234 s [0.1201, 0.1270]`, `n/a`, or the value with `no interval`."""
    if fig is None:
        return "n/a"
    if fig.unit == "%":
        bounds = [f"{number(v)}%" for v in (fig.interval.low, fig.interval.high)] if fig.interval else []
        unit = "%"
    else:
        bounds = [number(v) for v in (fig.interval.low, fig.interval.high)] if fig.interval else []
        unit = f" {fig.unit}" if fig.unit else ""
    interval = f" [{bounds[0]}, {bounds[1]}]" if bounds else " (no interval)"
    return f"{number(fig.value)}{unit}{interval}"


def points(change: float) -> str:
    """`-12.3 pp`, `+0.4 pp`; one that rounds to zero is `0.0 pp`."""
    text = f"{change:+.1f}"
    return f"{'0.0' if text[1:] == '0.0' else text} {POINTS}"


def change_text(ch: Check) -> str:
    """`+38.0% [+30.1%, +47.2%]` (a share of the baseline), `-12.3 pp [-15.9 pp, -8.8 pp]` (a budget in
    percentage points), or the change without an interval, or n/a."""
    if ch.change is None:
        return "n/a"
    say = points if ch.budget.points else percent
    interval = f" [{say(ch.interval[0])}, {say(ch.interval[1])}]" if ch.interval is not None else ""
    return say(ch.change) + interval


def why_failed(ch: Check) -> str:
    """A failed check in one phrase: `ttft_p99 +38.0% [+30.1%, +47.2%] past its +10% budget`."""
    if ch.decision == MISSING:
        return f"{ch.budget.figure} not judged: {ch.reason}"
    return f"{ch.budget.figure} {change_text(ch)} past its {ch.budget.text} budget"


def verdict_line(result: GateResult) -> str:
    """The first line: `gate: PASS: ...` or `gate: FAIL: <each failure>`."""
    decision = result.decision
    against = f"against {result.baseline.run_id}"
    if decision.nothing is not None:
        others = [why_failed(c) for c in decision.failures]
        return f"gate: FAIL: {'; '.join([decision.nothing, *others])} ({against})"
    if decision.passed:
        held = len(decision.judged)
        text = f"gate: PASS: {held} figure{'' if held == 1 else 's'} within budget {against}"
        undecided = [c for c in decision.checks if c.decision == UNDECIDED]
        if undecided:
            text += "; undecided (past the budget at its value only): " + "; ".join(
                f"{c.budget.figure} {change_text(c)}" for c in undecided
            )
        skipped = [c for c in decision.checks if c.decision == MISSING]
        if skipped:
            text += "; not judged: " + ", ".join(c.budget.figure for c in skipped)
        return text
    failures = decision.failures
    if failures:
        return f"gate: FAIL: {'; '.join(why_failed(c) for c in failures)} ({against})"
    return f"gate: FAIL: no figure could be judged {against} (--missing pass needs at least one)"


def evidence_lines(result: GateResult) -> list[str]:
    """One line per budgeted figure: baseline and run with their intervals, the change, the budget, the decision."""
    lines = []
    for ch in result.decision.checks:
        lines.append(
            f"  {ch.budget.figure} ({ch.claim}): baseline {figure_text(ch.base)}, run {figure_text(ch.run)}, "
            f"change {change_text(ch)}, budget {ch.budget.text}: {ch.decision} ({ch.reason})"
        )
    return lines


def context_lines(result: GateResult) -> list[str]:
    budgets = ", ".join(f"{b.figure}={b.text}" + ("" if b.given else " (always)") for b in result.budgets)
    lines = [
        f"run: {result.run.run_id} ({result.run.where})",
        f"baseline: {result.baseline.run_id} ({result.baseline.where}; --baseline {result.query})",
        f"budgets: {budgets}" + (" (the defaults)" if result.defaults else ""),
        f"rule: {RULE}; a figure not judged {'fails' if result.decision.missing == 'fail' else 'is reported'} "
        f"(--missing {result.decision.missing}); {DRIFT}",
    ]
    lines += [f"workloads differ, gated anyway: {d}" for d in result.differences]
    lines += [f"note: {n}" for n in result.baseline.notes]
    return lines


def unheld_line(result: Unheld) -> str:
    return f"gate: PASS: no baseline to hold {result.run.run_id} against (--no-baseline pass): {result.reason}"


def lines_of(result: GateResult | Unheld) -> list[str]:
    """Everything `gate` prints: the verdict, the evidence, then what was compared and by which rule."""
    if isinstance(result, Unheld):
        return [
            unheld_line(result),
            f"run: {result.run.run_id} ({result.run.where})",
            "note: nothing was gated; once this run is in the store, it is a baseline for the next",
        ]
    return [verdict_line(result), *evidence_lines(result), *context_lines(result)]


def _figure_json(fig: Figure | None) -> dict[str, Any] | None:
    if fig is None:
        return None
    out: dict[str, Any] = {"value": fig.value, "unit": fig.unit}
    if fig.interval is not None:
        i = fig.interval
        out["interval"] = {"low": i.low, "high": i.high, "confidence": i.confidence, "method": i.method}
    return out


def result_json(result: GateResult | Unheld) -> dict[str, Any]:
    """The JSON result file (`--json FILE`) a CI job keeps: the verdict, each figure's evidence, the sides."""
    if isinstance(result, Unheld):
        run = {"run_id": result.run.run_id, "scenario": result.run.scenario, "where": result.run.where}
        return {
            "gate": "PASS",
            "exit_code": 0,
            "summary": unheld_line(result),
            "no_baseline": result.reason,
            "run": run,
            "baseline": None,
            "figures": [],
            "failures": [],
        }
    figures = []
    failures = result.decision.failures
    for ch in result.decision.checks:
        figures.append(
            {
                "figure": ch.budget.figure,
                "claim": ch.claim,
                "budget": ch.budget.text,
                "budget_fraction": None if ch.budget.points else ch.budget.limit,
                "budget_points": ch.budget.limit if ch.budget.points else None,
                "change_unit": POINTS if ch.budget.points else "fraction",
                "bad_direction": "up" if ch.budget.bad == UP else "down",
                "baseline": _figure_json(ch.base),
                "run": _figure_json(ch.run),
                "change": ch.change,
                "change_interval": list(ch.interval) if ch.interval is not None else None,
                "decision": ch.decision,
                "reason": ch.reason,
                "fails_gate": ch in failures,
            }
        )
    side = {"run_id": "", "scenario": "", "where": ""}
    return {
        "gate": result.decision.verdict,
        "exit_code": result.exit_code,
        "summary": verdict_line(result),
        "rule": RULE,
        "missing": result.decision.missing,
        "budgets_are_defaults": result.defaults,
        "run": {**side, "run_id": result.run.run_id, "scenario": result.run.scenario, "where": result.run.where},
        "baseline": {
            **side,
            "run_id": result.baseline.run_id,
            "scenario": result.baseline.scenario,
            "where": result.baseline.where,
            "query": result.query,
        },
        "figures": figures,
        "measured_nothing": result.decision.nothing,
        "failures": [*([result.decision.nothing] if result.decision.nothing else []), *map(why_failed, failures)],
        "workload_differences": result.differences,
        "notes": list(result.baseline.notes),
    }


def write_json(result: GateResult | Unheld, path: Path) -> None:
    try:
        path.write_text(json.dumps(result_json(result), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--json: cannot write {path}: {exc.strerror}") from None


__all__ = [
    "FAIL",
    "NO_BASELINE_POLICIES",
    "GateResult",
    "GateSide",
    "Unheld",
    "budgets_of",
    "gate",
    "lines_of",
    "result_json",
    "write_json",
]
