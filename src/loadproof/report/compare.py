"""`loadproof compare`: change tables between runs, every baseline kept side by side, and a decision.

Pure functions over loaded runs and their claims; `cli/compare.py` loads the runs and prints.

- Only like is compared with like: every run of every side must be of the candidate's scenario, with
  the same workload in its plan (`Plan.workload()`: sessions, lengths, window, families,
  concurrency...); otherwise `compare` refuses with one line naming what differs, unless asked to
  compare them anyway (`anyway=True`, `--anyway`), and then says how they differ.
- Change = (candidate - baseline) / baseline for every numeric claim the candidate shares with a
  baseline, one column per baseline: never the most favourable baseline alone.
- Which way is better is the claim's own `direction`, set where it is computed; a budget
  (`--max-slowdown`) applies to a figure with a direction in tokens/s (throughput) or s (latency).
- A side (BASE, CAND, each --baseline) is one run or several runs of one scenario (repeats). A
  throughput run whose records carry several `repeat` values counts as that many repeats. With at
  least 2 repeats on both sides, a value is the mean over repeats and the change gets a percentile
  bootstrap 95% interval across runs (each side resampled with replacement, `random.Random(seed)` per
  row). With one run a side, a figure whose claim carries its own interval in both runs gets the
  difference's interval within runs (`metrics.difference.mover_difference`, as a share of the baseline);
  a claim without one, or one run against repeats, is descriptive, as it is measured, no interval.
- A change whose interval holds 0 is `not distinguishable`: never better or worse, and no budget rejects it.
- Decision: REJECT when any acceptance verdict of the candidate is FAIL (named with its failed
  criteria), when a required acceptance is missing or failed, or when a throughput or latency figure
  is worse than `max_slowdown` against ANY baseline and distinguishable (the client's own send lag,
  client lag and queue wait only with `judge_client`: they measure the load generator, not the
  deployment). Otherwise ACCEPT, but only when the sides share at least one figure a budget applies to;
  without one there is no verdict.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from loadproof.catalog import column, entry
from loadproof.errors import UsageError
from loadproof.metrics import scenario_claims
from loadproof.metrics.ab import relative_change
from loadproof.metrics.claims import Claim, criteria_of, criterion_name, verdict_of
from loadproof.metrics.difference import mover_difference
from loadproof.metrics.intervals import Interval
from loadproof.metrics.latency import client_side
from loadproof.plans import Plan, load_plan, workload_difference
from loadproof.plans.ab import DEFAULT_RESAMPLES
from loadproof.registry import Registry
from loadproof.report.change import (
    ACROSS_RUNS,
    HIGHER,
    LOWER,
    NEITHER,
    WITHIN_RUNS,
    Change,
    bootstrap_change_ci,
    ci_text,
    figure_text,
    percent,
)
from loadproof.store.run_dir import Run

ACCEPT, REJECT, NO_VERDICT = "ACCEPT", "REJECT", "NO VERDICT"
NOTHING_BUDGETED = "no shared figure a budget applies to (a figure in tokens/s or s with a direction)"
DESCRIPTIVE = "descriptive: sequential single runs, no confidence interval"
DESCRIPTIVE_ONE_SIDE = "descriptive: a single run on one side, no confidence interval"
ACROSS = "{level:.0%} percentile bootstrap interval across runs, {resamples} resamples, seed {seed}"
WITHIN = (
    "{level:.0%} interval within runs: each run's own interval of the figure (claims.json), combined for "
    "independent runs (MOVER), as a share of the baseline; {none} of {total} figures have none, descriptive"
)
DRIFT_NOTE = (
    "Intervals within runs cover each run's sampling noise (its requests), not drift of the machine or the "
    "engine between the runs, which is often larger (the H200's decode step moves about 20% from run to run): "
    "`not distinguishable` holds; a difference may still be drift. Repeats of each side (BASE=run1,run2,...) "
    "give the interval across runs instead."
)
DEFAULT_SEED = 20_240_607

# What a budget (--max-slowdown) applies to: a figure in one of these units whose direction is the
# given one. Rates and times are what "slower" means; counts, fractions and settings are not budgeted.
BUDGETS: dict[str, tuple[str, str]] = {"tokens/s": (HIGHER, "throughput"), "s": (LOWER, "latency")}
# a scenario's answer-by-answer comparison, where its catalog entry names one
answer_functions: Registry[Callable[[Run, Run], dict[str, list[Any]]]] = Registry.over(
    "scenario", column("answer_changes")
)


def budget_of(claim: Claim) -> str | None:
    """`throughput` or `latency` when a budget applies to the claim; None otherwise."""
    direction, budget = BUDGETS.get(claim.unit, (None, None))
    return budget if claim.kind == "figure" and claim.direction == direction else None


def number_of(claim: Claim) -> float | None:
    """The claim's value where it is a number (a figure or a count, not a fact or a bool); else None."""
    value = claim.value
    if claim.is_number and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def parse_percent(text: str) -> float:
    """'10%' or '10' -> 0.10 (a percentage, never a fraction)."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise UsageError(f"--max-slowdown takes a percentage such as 10% (got {text!r})") from None
    if value < 0:
        raise UsageError(f"--max-slowdown must be >= 0 (got {text!r})")
    return value / 100


@dataclass
class Side:
    """One side of a comparison: one or more runs of one scenario, their claims and per-repeat samples."""

    label: str
    runs: list[Run]
    claims: list[list[Claim]]  # full-run claims, one list per run
    samples: dict[str, list[float]]  # numeric claim -> one value per repeat
    printed: dict[str, str]  # numeric claim -> its printed form in the first run (for decimals)
    plans: list[Plan]  # one per run
    meaning: dict[str, Claim] = field(default_factory=dict)  # numeric claim -> its first instance (direction, unit)
    intervals: dict[str, Interval] = field(default_factory=dict)  # numeric claim -> its first run's own interval

    @property
    def scenario(self) -> str:
        return str(self.runs[0].manifest.scenario)

    @property
    def run_ids(self) -> str:
        return ", ".join(r.run_id for r in self.runs)

    def value(self, name: str) -> float | None:
        values = self.samples.get(name)
        return statistics.fmean(values) if values else None

    def repeats(self, name: str) -> int:
        return len(self.samples.get(name, []))

    def verdicts(self) -> list[tuple[str, Claim, list[Claim]]]:
        """(run id, verdict claim, its failed criteria) of every run of the side that has a verdict."""
        out = []
        for run, claims in zip(self.runs, self.claims):
            verdict = verdict_of(claims)
            if verdict is not None:
                out.append((run.run_id, verdict, [c for c in criteria_of(claims) if c.value == "FAIL"]))
        return out


def split_repeats(run: Run) -> list[Run]:
    """A run whose records hold several `repeat` values, as one Run per repeat, where its scenario's claims
    are functions of the records alone (its catalog entry's `splits_by_repeat`)."""
    scenario = entry(str(run.manifest.scenario))
    if scenario is None or not scenario.splits_by_repeat:
        return [run]
    repeats = sorted({r.repeat for r in run.records})
    if len(repeats) < 2:
        return [run]
    return [replace(run, records=[r for r in run.records if r.repeat == k]) for k in repeats]


def build_side(
    label: str, runs: Sequence[Run], claims_of: Callable[[Run], list[Claim]], plan_of: Callable[[Run], Plan] = load_plan
) -> Side:
    """Claims of every run (`claims_of`, e.g. metrics.compute_claims), its plan, one sample per repeat."""
    scenarios = sorted({str(r.manifest.scenario) for r in runs})
    if len(scenarios) > 1:
        raise UsageError(f"{label}: repeats must be runs of one scenario (got {', '.join(scenarios)})")
    all_claims: list[list[Claim]] = []
    samples: dict[str, list[float]] = {}
    printed: dict[str, str] = {}
    meaning: dict[str, Claim] = {}
    intervals: dict[str, Interval] = {}
    for run in runs:
        claims = claims_of(run)
        all_claims.append(claims)
        parts = split_repeats(run)
        per_repeat = [{c.name: c for c in scenario_claims(part)} for part in parts] if len(parts) > 1 else []
        for c in claims:
            value = number_of(c)
            if value is None:
                continue
            if c.name not in meaning and c.interval is not None:
                intervals[c.name] = c.interval
            printed.setdefault(c.name, c.printed)
            meaning.setdefault(c.name, c)
            split = [v for p in per_repeat if c.name in p and (v := number_of(p[c.name])) is not None]
            samples.setdefault(c.name, []).extend(split or [value])
    return Side(
        label=label,
        runs=list(runs),
        claims=all_claims,
        samples=samples,
        printed=printed,
        plans=[plan_of(run) for run in runs],
        meaning=meaning,
        intervals=intervals,
    )


@dataclass
class BaselineComparison:
    baseline: Side
    changes: dict[str, Change]

    @property
    def descriptive(self) -> bool:
        return all(c.ci is None for c in self.changes.values())

    @property
    def basis(self) -> str | None:
        """ACROSS_RUNS or WITHIN_RUNS: where the intervals against this baseline come from; None: none."""
        return next((c.basis for c in self.changes.values() if c.basis is not None), None)


@dataclass
class Comparison:
    candidate: Side
    baselines: list[BaselineComparison]
    names: list[str]  # the rows: numeric claims the candidate shares with at least one baseline
    verdict: str  # ACCEPT | REJECT | NO VERDICT
    reasons: list[str]  # why REJECT; or, for NO VERDICT, why there is none
    seed: int
    resamples: int
    max_slowdown: float | None
    required: list[str]
    notes: list[str] = field(default_factory=list)
    answers: list[tuple[str, dict[str, list[Any]]]] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)  # how the runs differ, when compared anyway
    judge_client: bool = False  # the client's own diagnostics decide too (`--judge-client`)


def compare_sides(
    base: Side, cand: Side, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> BaselineComparison:
    changes = {}
    for name in cand.samples:
        if not base.samples.get(name):
            continue
        changes[name] = change_of(name, base, cand, seed, resamples)
    return BaselineComparison(baseline=base, changes=changes)


def change_of(name: str, base: Side, cand: Side, seed: int, resamples: int) -> Change:
    """One claim's change: its interval across runs where both sides have repeats, within runs where each
    side is one run whose claim carries its own interval; else none, and why."""
    b, c = base.value(name), cand.value(name)
    assert b is not None and c is not None
    claim = cand.meaning[name]
    n_base, n_cand = base.repeats(name), cand.repeats(name)
    change = Change(name, claim.direction, budget_of(claim), b, c, relative_change(b, c), None, n_base, n_cand)
    if n_base >= 2 and n_cand >= 2:
        ci = bootstrap_change_ci(base.samples[name], cand.samples[name], random.Random(seed), resamples)
        missing = None if ci is not None else "baseline 0"
        return replace(change, ci=ci, basis=ACROSS_RUNS if ci else None, missing=missing)
    if n_base != 1 or n_cand != 1:
        return replace(change, missing="one value on a side")
    lacking = [who for who, side in (("baseline", base), ("candidate", cand)) if name not in side.intervals]
    if lacking:
        return replace(change, missing="no interval in " + ("either run" if len(lacking) == 2 else f"the {lacking[0]}"))
    diff = mover_difference(b, base.intervals[name], c, cand.intervals[name])
    if diff is None:
        return replace(change, missing="intervals at different confidences")
    if b == 0:
        return replace(change, missing="baseline 0", diff_ci=(diff.low, diff.high))
    low, high = sorted((diff.low / b, diff.high / b))  # as (cand - base) / base is, sign and all
    return replace(change, ci=(low, high), basis=WITHIN_RUNS, diff_ci=(diff.low, diff.high))


def decide(
    cand: Side,
    baselines: list[BaselineComparison],
    max_slowdown: float | None,
    required: Sequence[str],
    judge_client: bool = False,
) -> list[str]:
    """The reasons to REJECT the candidate; none means ACCEPT. The client's own diagnostics (its send lag,
    `metrics.latency.client_side`) are not the deployment's figures and decide nothing unless `judge_client`."""
    reasons = []
    verdicts = cand.verdicts()
    for run_id, verdict, failed in verdicts:
        if verdict.value == "FAIL":
            why = "; ".join(f"{criterion_name(c)}: {c.formula}" for c in failed) or verdict.formula
            reasons.append(f"{verdict.name} FAIL in candidate run {run_id}: {why}")
    for scenario in required:
        name = f"{scenario}.verdict"
        if not any(v.name == name for _, v, _ in verdicts):
            reasons.append(f"--require {scenario}: the candidate has no {name} claim")
    if max_slowdown is not None:
        for bc in baselines:
            for ch in over_budget(bc, max_slowdown, judge_client):
                if ch.distinguishable is False:  # not told from noise: never a regression (a note says so)
                    continue
                like = cand.printed.get(ch.name)
                interval = f" {ci_text(ch)}" if ch.ci is not None else ""
                reasons.append(
                    f"{ch.name}: {ch.change:+.1%}{interval} vs {bc.baseline.label} ({ch.budget} worse than "
                    f"the {max_slowdown * 100:g}% budget; {figure_text(ch.base, like)} -> {figure_text(ch.cand, like)})"
                )
    return reasons


def over_budget(bc: BaselineComparison, max_slowdown: float, judge_client: bool = False) -> list[Change]:
    """The changes against this baseline worse than the budget at their value, distinguishable or not: a
    throughput or latency figure (`budget_of`), never one that reads 0.0% (same), the client's own diagnostics
    only with `judge_client`."""
    out = []
    for ch in bc.changes.values():
        if ch.change is None or ch.budget is None or ch.same or (client_side(ch.name) and not judge_client):
            continue
        worse = -ch.change if ch.direction == HIGHER else ch.change
        if worse > max_slowdown + 1e-12:
            out.append(ch)
    return out


def unlike(cand: Side, baselines: Sequence[Side]) -> list[str]:
    """How the runs differ from the candidate's first run: scenario, then workload; empty when alike."""
    ref, ref_plan = cand.runs[0], cand.plans[0]
    out = []
    for side in [cand, *baselines]:
        for run, plan in zip(side.runs, side.plans):
            if run is ref:
                continue
            scenario = str(run.manifest.scenario)
            who = f"{side.label} ({run.run_id})" if len(side.runs) > 1 else side.label
            if scenario != cand.scenario:
                out.append(f"{who} is a {scenario} run, {cand.label} a {cand.scenario} run")
                continue
            diff = workload_difference(plan, ref_plan)
            if diff:
                out.append(f"{who} vs {cand.label}: " + ", ".join(diff))
    return out


def compare(
    cand: Side,
    baselines: Sequence[Side],
    *,
    max_slowdown: float | None = None,
    required: Sequence[str] = (),
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    anyway: bool = False,
    judge_client: bool = False,
) -> Comparison:
    differences = unlike(cand, baselines)
    if differences and not anyway:
        raise UsageError(
            f"not compared, the runs differ: {'; '.join(differences)}; pass --anyway to compare them anyway"
        )
    comparisons = [compare_sides(base, cand, seed, resamples) for base in baselines]
    for bc in comparisons:  # a scenario's own claims are named after it; engine agreement and telemetry are not
        if not any(n.split(".", 1)[0] == cand.scenario for n in bc.changes):
            raise UsageError(
                f"no shared claim between {bc.baseline.label} ({bc.baseline.scenario} run) and "
                f"{cand.label} ({cand.scenario} run): compare runs of the same scenario and workload"
            )
    names = [n for n in cand.samples if any(n in bc.changes for bc in comparisons)]
    reasons = decide(cand, comparisons, max_slowdown, required, judge_client)
    verdict = REJECT if reasons else ACCEPT
    if not reasons and not any(ch.budget for bc in comparisons for ch in bc.changes.values()):
        verdict, reasons = NO_VERDICT, [NOTHING_BUDGETED]
    notes = []
    for bc in comparisons:
        for run_id, failed_verdict, failed in bc.baseline.verdicts():
            if failed_verdict.value == "FAIL":
                notes.append(
                    f"baseline run {run_id} failed its acceptance ({failed_verdict.name}: "
                    f"{', '.join(criterion_name(c) for c in failed)}); its figures are shown as measured"
                )
    for i, bc in enumerate(comparisons, start=1):
        for ch in over_budget(bc, max_slowdown, judge_client) if max_slowdown is not None else []:
            if ch.distinguishable is False:
                notes.append(
                    f"{ch.name}: {percent(ch.change or 0.0)} {ci_text(ch)} vs B{i}, over the budget at its value "
                    "but not distinguishable: not a reason to reject"
                )
    if any(bc.basis == WITHIN_RUNS for bc in comparisons):
        notes.append(DRIFT_NOTE)
    if any(bc.basis == ACROSS_RUNS for bc in comparisons):
        notes.append(
            "Repeats of one side ran one after another, not interleaved with the other side: the interval "
            "covers repeat-to-repeat noise, not drift of the machine between the sides "
            "(`loadproof run ab` interleaves)."
        )
    return Comparison(
        candidate=cand,
        baselines=comparisons,
        names=names,
        verdict=verdict,
        reasons=reasons,
        seed=seed,
        resamples=resamples,
        max_slowdown=max_slowdown,
        required=list(required),
        notes=notes,
        differences=differences,
        judge_client=judge_client,
    )


def add_answer_changes(comparison: Comparison) -> None:
    """Answer-by-answer changes against each baseline of the candidate's scenario, where the scenario's
    catalog entry names how (`answer_changes`: quality's)."""
    cand = comparison.candidate
    bases = [bc.baseline for bc in comparison.baselines if bc.baseline.scenario == cand.scenario]
    if cand.scenario not in answer_functions or not bases:
        return
    changes_of = answer_functions.get(cand.scenario)
    for base in bases:
        comparison.answers.append((base.label, changes_of(base.runs[0], cand.runs[0])))
    if len(cand.runs) > 1 or any(len(b.runs) > 1 for b in bases):
        comparison.notes.append("answer-by-answer lists compare the first run of each side")


@dataclass(frozen=True)
class Tally:
    """How the figures judged against one baseline came out (those with a direction, not the client's own):
    told apart by their interval (better, worse, or a difference under 0.05%), not distinguishable, or with no
    interval (compared as measured)."""

    differ: list[str]
    better: list[str]
    worse: list[str]
    not_distinguishable: list[str]
    without: list[str]


def tally(bc: BaselineComparison) -> Tally:
    judged = [ch for ch in bc.changes.values() if ch.direction != NEITHER and not client_side(ch.name)]
    differ = [ch for ch in judged if ch.distinguishable]
    return Tally(
        differ=[ch.name for ch in differ],
        better=[ch.name for ch in differ if ch.judgement == "better"],
        worse=[ch.name for ch in differ if ch.judgement == "worse"],
        not_distinguishable=[ch.name for ch in judged if ch.distinguishable is False],
        without=[ch.name for ch in judged if ch.distinguishable is None],
    )
