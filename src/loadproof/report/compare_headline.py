"""What `compare` prints by default: its decision first, the changes that decide it, the scenario's headline
figures side by side, and the client's own diagnostics apart (they never decide unless asked). The whole
table is in the Markdown (`--out`) and on the console with `-v`. Pure: returns lines and rows.
"""

from __future__ import annotations

from loadproof.metrics.headline import matcher
from loadproof.metrics.latency import client_side
from loadproof.report.change import change_text, ci_text, figure_text
from loadproof.report.compare import NO_VERDICT, Comparison
from loadproof.report.headline import console_headline

SHOWN_REASONS = 5
KEY_ROWS = 12


def decision_lines(comparison: Comparison, shown: int | None = SHOWN_REASONS) -> list[str]:
    """`REJECT: 2 reasons` and the first `shown` reasons (None: all); `ACCEPT: ...`; `NO VERDICT: why`."""
    reasons = comparison.reasons
    if comparison.verdict == NO_VERDICT:
        return [f"{NO_VERDICT}: {'; '.join(reasons)}"]
    if not reasons:
        budget = (
            f"no throughput or latency figure worse than the {comparison.max_slowdown * 100:g}% budget"
            if comparison.max_slowdown is not None
            else "no acceptance failed (no --max-slowdown budget given)"
        )
        return [f"{comparison.verdict}: {budget}"]
    lines = [f"{comparison.verdict}: {len(reasons)} reason{'' if len(reasons) == 1 else 's'}"]
    lines += [f"  {_short(comparison, reason)}" for reason in reasons[:shown]]
    if shown is not None and len(reasons) > shown:
        lines.append(f"  ... {len(reasons) - shown} more (-v, or --out FILE)")
    return lines


def _short(comparison: Comparison, reason: str) -> str:
    """A reason with each baseline's label (a path, often long) as the legend's B1, B2..."""
    for i, bc in enumerate(comparison.baselines, start=1):
        reason = reason.replace(f"vs {bc.baseline.label} (", f"vs B{i} (")
    return reason


def key_names(comparison: Comparison) -> list[str]:
    """The rows worth a first look: the scenario's headline figures (`metrics.headline`) in its order, else
    the figures a budget applies to; never the client's own diagnostics."""
    meaning = comparison.candidate.meaning
    names = [n for n in comparison.names if not client_side(n) and meaning[n].direction != "neither"]
    declared = console_headline(comparison.candidate.scenario)
    if declared is None:
        budgeted = {n for bc in comparison.baselines for n, ch in bc.changes.items() if ch.budget}
        return [n for n in names if n in budgeted][:KEY_ROWS]
    out: list[str] = []
    for spec in declared:
        for figure in spec.figures:
            match = matcher(figure.claim)
            out += [n for n in names if match(n) is not None and n not in out]
    return out[:KEY_ROWS]


def key_table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """claim, candidate, and per baseline its value, the change and (with repeats) its interval, for
    `key_names`."""
    cand = comparison.candidate
    with_ci = [not bc.descriptive for bc in comparison.baselines]
    header = ["claim", "candidate"]
    for i, ci in enumerate(with_ci, start=1):
        header += [f"B{i}", f"change vs B{i}"] + ([f"95% CI vs B{i}"] if ci else [])
    rows = []
    for name in key_names(comparison):
        value = cand.value(name)
        row = [name, figure_text(value, cand.printed.get(name)) if value is not None else "n/a"]
        for bc, ci in zip(comparison.baselines, with_ci):
            ch = bc.changes.get(name)
            if ch is None:
                row += ["n/a", "n/a"] + (["n/a"] if ci else [])
            else:
                base = figure_text(ch.base, bc.baseline.printed.get(name))
                row += [base, change_text(ch)] + ([ci_text(ch)] if ci else [])
        rows.append(row)
    return header, rows


def client_line(comparison: Comparison) -> str | None:
    """One line of the client's own diagnostics against the first baseline (p99s), said not to decide."""
    if not comparison.baselines:
        return None
    changes = comparison.baselines[0].changes
    shown = [
        f"{name.split('.', 1)[-1]} {change_text(ch)}"
        for name, ch in changes.items()
        if client_side(name) and name.endswith(".p99")
    ]
    if not shown:
        return None
    judged = "judged (--judge-client)" if comparison.judge_client else "not judged"
    return f"client's own diagnostics vs B1, {judged}: " + ", ".join(shown)
