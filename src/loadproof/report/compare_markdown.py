"""The comparison written out (`loadproof compare -v`, `--out FILE.md`, the HTML page's body): the legend of the
sides and where each baseline's intervals come from, the change table, the differences in words (what differs
and by how much, with its interval; what is not distinguishable), the decision, the answers and the notes.
Pure: returns text and rows.
"""

from __future__ import annotations

from typing import Any

from loadproof.metrics.ab import LEVEL
from loadproof.plans import workload_text
from loadproof.report.change import ACROSS_RUNS, WITHIN_RUNS, change_text, ci_text, figure_text, sentence
from loadproof.report.compare import (
    ACROSS,
    DESCRIPTIVE,
    DESCRIPTIVE_ONE_SIDE,
    NO_VERDICT,
    WITHIN,
    BaselineComparison,
    Comparison,
    Side,
    tally,
)


def item_label(item: Any, with_answers: bool = True) -> str:
    """An answer-change entry as `suite/item_id [mode]: base -> candidate` (a bare id as itself)."""
    if not isinstance(item, dict):
        return str(item)
    label = "/".join(str(item[k]) for k in ("suite", "item_id") if item.get(k) is not None)
    label += f" [{item['mode']}]" if item.get("mode") else ""
    if with_answers and ("base" in item or "candidate" in item):
        label += f": {item.get('base', '-')} -> {item.get('candidate', '-')}"
    return label.replace("|", "\\|").replace("\n", " ")


def table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """The change table: candidate, then for each baseline its value, the change and (with repeats) the CI."""
    with_ci = [not bc.descriptive for bc in comparison.baselines]
    header = ["claim", "better", "candidate"]
    for i, ci in enumerate(with_ci, start=1):
        header += [f"B{i}", f"change vs B{i}"] + ([f"95% CI vs B{i}"] if ci else [])
    rows = []
    cand = comparison.candidate
    for name in comparison.names:
        value = cand.value(name)
        row = [
            name,
            cand.meaning[name].direction,
            figure_text(value, cand.printed.get(name)) if value is not None else "n/a",
        ]
        for bc, ci in zip(comparison.baselines, with_ci):
            ch = bc.changes.get(name)
            if ch is None:
                row += ["n/a", "n/a"] + (["n/a"] if ci else [])
            else:
                row += [figure_text(ch.base, bc.baseline.printed.get(name)), change_text(ch)] + (
                    [ci_text(ch)] if ci else []
                )
        rows.append(row)
    return header, rows


def legend(comparison: Comparison) -> list[str]:
    cand = comparison.candidate
    lines = [f"- candidate: {cand.label} ({cand.scenario}; run {cand.run_ids}; {_repeats(cand)})"]
    workload = workload_text(cand.plans[0])
    if workload:
        lines.append(f"- workload: {workload}")
    for i, bc in enumerate(comparison.baselines, start=1):
        side = bc.baseline
        single = _repeats(side) == "1 repeat" and _repeats(cand) == "1 repeat"
        how = (DESCRIPTIVE if single else DESCRIPTIVE_ONE_SIDE) if bc.descriptive else basis_text(comparison, bc)
        lines.append(f"- B{i}: {side.label} ({side.scenario}; run {side.run_ids}; {_repeats(side)}): {how}")
    return lines


def basis_text(comparison: Comparison, bc: BaselineComparison) -> str:
    """Where the intervals against this baseline come from, in words (the legend's)."""
    if bc.basis == ACROSS_RUNS:
        return ACROSS.format(level=LEVEL, resamples=comparison.resamples, seed=comparison.seed)
    counts = tally(bc)
    total = len(counts.differ) + len(counts.not_distinguishable) + len(counts.without)
    return WITHIN.format(level=LEVEL, none=len(counts.without), total=total)


def tally_text(bc: BaselineComparison) -> str:
    """`3 figures differ (2 better, 1 worse), 25 not distinguishable, 12 without an interval (as measured)`."""
    counts = tally(bc)
    if bc.basis is None:
        return f"no interval, {len(counts.without)} figures compared as measured (descriptive)"
    differ = len(counts.differ)
    text = f"{differ} figure{'' if differ == 1 else 's'} differ{'s' if differ == 1 else ''}"
    if differ:
        text += f" ({len(counts.better)} better, {len(counts.worse)} worse)"
    text += f", {len(counts.not_distinguishable)} not distinguishable"
    if counts.without:
        text += f", {len(counts.without)} without an interval (as measured)"
    return text


def difference_lines(comparison: Comparison) -> list[str]:
    """Per baseline, the figures that differ in words, by how much and with the interval, then those not
    distinguishable; nothing against a baseline without intervals."""
    lines: list[str] = []
    for i, bc in enumerate(comparison.baselines, start=1):
        if bc.basis is None:
            continue
        basis = "95% intervals within runs" if bc.basis == WITHIN_RUNS else "95% intervals across runs"
        lines += [f"Against B{i} ({basis}): {tally_text(bc)}.", ""]
        counts = tally(bc)
        for name in counts.differ + counts.not_distinguishable:
            ch = bc.changes[name]
            said = sentence(ch, "the candidate", f"B{i}", comparison.candidate.printed.get(name), units=True)
            lines.append(f"- `{name}`: {said}")
        lines.append("")
    return lines


def _repeats(side: Side) -> str:
    n = max((len(v) for v in side.samples.values()), default=1)
    return "1 repeat" if n == 1 else f"{n} repeats, values are means over repeats"


def render_markdown(comparison: Comparison) -> str:
    lines = [f"# loadproof compare: {comparison.verdict}", ""]
    lines += legend(comparison)
    lines += [f"- runs differ, compared anyway: {d}" for d in comparison.differences]
    lines += [
        "",
        "Change = (candidate - baseline) / baseline, against every baseline. `better` says which way is "
        "good for the claim, as the claim states it (neither: not judged).",
        "",
    ]
    if all(bc.descriptive for bc in comparison.baselines):
        single = all(
            len(v) == 1
            for side in [comparison.candidate] + [bc.baseline for bc in comparison.baselines]
            for v in side.samples.values()
        )
        lines += [f"_{DESCRIPTIVE if single else DESCRIPTIVE_ONE_SIDE}_", ""]
    header, rows = table(comparison)
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join([f"`{row[0]}`"] + row[1:]) + " |" for row in rows]
    differences = difference_lines(comparison)
    if differences:
        lines += ["", "## Differences", ""] + differences[:-1]
    lines += ["", f"## Decision: {comparison.verdict}", ""]
    budgets = []
    if comparison.max_slowdown is not None:
        budgets.append(
            f"max slowdown {comparison.max_slowdown * 100:g}% (throughput and latency, against every baseline)"
        )
    budgets += [f"require {s}.verdict == PASS" for s in comparison.required]
    if comparison.max_slowdown is not None and not comparison.judge_client:
        budgets.append("the client's own send lag, client lag and queue wait are shown, not judged")
    lines.append("Budgets: " + ("; ".join(budgets) if budgets else "none given (only failed acceptances reject)"))
    lines.append("")
    if comparison.verdict == NO_VERDICT:
        lines += [f"- no verdict: {r}" for r in comparison.reasons]
    else:
        lines += [f"- REJECT: {r}" for r in comparison.reasons] or ["- every budget held and no acceptance failed"]
    if comparison.answers:
        lines += ["", "## Answers, one by one", ""]
        for label, changes in comparison.answers:
            lines += [f"Against {label}:", "", "| category | count | items |", "|---|---|---|"]
            for category, items in changes.items():
                shown = ", ".join(item_label(i, category != "same_answer") for i in items[:50])
                shown += f" (+{len(items) - 50} more)" if len(items) > 50 else ""
                lines.append(f"| {category} | {len(items)} | {shown} |")
            lines.append("")
    if comparison.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in comparison.notes]
    return "\n".join(lines) + "\n"
