"""The end of a run on the console: at most about ten lines, the verdict or the scenario's key figures first.

0. What its figures do not measure (a warning: `--thinking` on a model that did not reason), first.
1. What decides: a run that measured nothing says so (the most frequent error in its own words); a run with
   an acceptance verdict says PASS or FAIL, and which criteria failed with their evidence; otherwise how many
   requests it recorded and how many failed, with the most frequent error (`load: 60 requests recorded, 0
   failed`).
2. The scenario's headline figures (`metrics.headline`, its catalog entry), then how far the client's
   counts and TTFT are from the engine's own counters (`crosscheck.*.diff_pct`), then a fleet's prefix hits and
   balance (`fleet.*`), in place of the scenario's own `prefix hits` line (one engine's expectation).
3. Where the report is, and that `-v` prints every table.

Everything else stays in report.md, report.html and claims.json. Pure: returns the lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadproof.metrics.claims import ACCEPTANCE, Claim, criteria_of, criterion_name, verdict_of
from loadproof.metrics.headline import CROSSCHECK, FLEET, Headline, headlines, render_lines, value_text
from loadproof.report.build import Report

SHOWN_FAILED_CRITERIA = 3
FALLBACK_FIGURES = 6  # a scenario without a declared headline: its first figures


def console_headline(scenario: str) -> Headline | None:
    """The figures a scenario's catalog entry names for the console (`metrics.headline`); report.html's badges
    are its figure panels' own (`metrics.figures.headline_of`)."""
    return headlines.get(scenario) if scenario in headlines else None


def decision(report: Report) -> str:
    """The first line: nothing measured, the verdict, or what was measured."""
    scenario = str(report.run.manifest.scenario)
    failures = report.failures
    nothing = failures.headline()
    if nothing is not None:
        return nothing[0].upper() + nothing[1:]
    verdicts = [c for c in report.claims if c.kind == "verdict"]
    if verdicts:  # the scenario's acceptance, and a prediction contract's where the run had one
        return "; ".join(_verdict_text(v, report.claims, scenario) for v in verdicts)
    return f"{scenario}: {failures.line()}"


def _verdict_text(verdict: Claim, claims: Sequence[Claim], scenario: str) -> str:
    """`capacity PASS: 10 of 10 acceptance criteria held`, or FAIL with each failed criterion's evidence;
    a prediction contract's verdict likewise (`prediction FAIL: ...`), its criteria its own."""
    prefix = verdict.name.removesuffix(".verdict")
    criteria = [c for c in criteria_of(list(claims)) if c.name.startswith(f"{prefix}.criteria.")]
    failed = [c for c in criteria if c.value == "FAIL"]
    if not failed:
        what = "acceptance criteria" if prefix == scenario else "criteria"
        return f"{prefix} {verdict.printed}: {len(criteria)} of {len(criteria)} {what} held"
    named = "; ".join(f"{criterion_name(c)} ({c.formula})" for c in failed[:SHOWN_FAILED_CRITERIA])
    more = len(failed) - SHOWN_FAILED_CRITERIA
    return f"{prefix} {verdict.printed}: {named}" + (f"; {more} more in the report" if more > 0 else "")


def figure_lines(scenario: str, claims: Sequence[Claim]) -> list[tuple[str, str]]:
    declared = console_headline(scenario)
    if declared is None:
        figures = [c for c in claims if c.kind not in ACCEPTANCE and c.is_number][:FALLBACK_FIGURES]
        return [("figures", " · ".join(f"{c.name} {value_text(c)}" for c in figures))] if figures else []
    return render_lines(declared, claims)


def headline_lines(report: Report, verbose_hint: bool = True) -> list[str]:
    """The run's headline, first line first."""
    scenario = str(report.run.manifest.scenario)
    claims = report.claims
    lines = [f"warning: {w}" for w in report.warnings]  # first: what the figures below do not measure
    lines.append(decision(report))
    fleet = render_lines(FLEET, claims)
    rows = figure_lines(scenario, claims)
    if fleet:  # a fleet's hits beside its policy's expectation stand for one engine's, which would assume one cache
        rows = [row for row in rows if row[0] != "prefix hits"]
    rows += render_lines(CROSSCHECK, claims) + fleet
    width = max((len(label) for label, _ in rows), default=0)
    lines += [f"  {label:<{width}}  {text}" for label, text in rows]
    failures = report.failures
    if verdict_of(claims) is not None and not failures.measured_nothing:  # else the first line has them
        lines.append(f"  {failures.line()}")
    path = report.run.path
    lines.append(f"report: {path / 'report.html'}" + (" (every figure: report.md, or -v here)" if verbose_hint else ""))
    return lines
