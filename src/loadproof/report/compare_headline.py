"""What `compare` prints by default: its decision first, the changes that decide it, how many figures differ
and how many are not distinguishable against each baseline, the scenario's headline figures side by side, and
the client's own diagnostics apart (they never decide unless asked). The whole
table is in the Markdown (`--out`) and on the console with `-v`. Pure: returns lines and rows.
"""

from __future__ import annotations

from loadproof.metrics.headline import matcher
from loadproof.metrics.latency import client_side
from loadproof.report.change import change_text, figure_text, sentence
from loadproof.report.compare import NO_VERDICT, Comparison
from loadproof.report.compare_markdown import tally_text
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


def tally_lines(comparison: Comparison) -> list[str]:
    """One line a baseline: `vs B1, 95% intervals within runs: 3 figures differ (2 better, 1 worse), 25 not
    distinguishable, 12 without an interval (as measured)`."""
    out = []
    for i, bc in enumerate(comparison.baselines, start=1):
        basis = f", 95% intervals {bc.basis}" if bc.basis else ""
        out.append(f"vs B{i}{basis}: {tally_text(bc)}")
    return out


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


def key_lines(comparison: Comparison) -> list[str]:
    """Per baseline, a title and one line a figure of `key_names`: its value in the baseline and the candidate,
    and the change in words (`sentence`): by how much and its interval, `not distinguishable`, or without an
    interval as measured."""
    names = key_names(comparison)
    cand = comparison.candidate
    lines: list[str] = []
    for i, bc in enumerate(comparison.baselines, start=1):
        shown = [(name, bc.changes[name]) for name in names if name in bc.changes]
        if not shown:
            continue
        how = f", 95% CI {bc.basis}" if bc.basis else ", no interval (descriptive)"
        lines.append(f"Key figures against B{i} (change = (candidate - B{i}) / B{i}{how}):")
        values = [
            f"{figure_text(ch.base, bc.baseline.printed.get(name))} -> {figure_text(ch.cand, cand.printed.get(name))}"
            for name, ch in shown
        ]
        width = max(len(name) for name, _ in shown)
        value_width = max(len(v) for v in values)
        for (name, ch), value in zip(shown, values):
            said = sentence(ch, why=bc.basis is not None)
            lines.append(f"  {name:<{width}}  {value:<{value_width}}  {said}")
    return lines


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
