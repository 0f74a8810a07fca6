"""What the commands share: the console a run prints through, a report's tables, profile tweaks."""

from __future__ import annotations

import shlex
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer

from loadproof.cli import ui
from loadproof.cli.apps import app
from loadproof.config.profile import Profile
from loadproof.metrics.claims import ACCEPTANCE
from loadproof.metrics.figures import tables_of
from loadproof.report.build import Report, build_report, criteria_rows
from loadproof.report.distributions import distribution_table
from loadproof.report.headline import decision as decision_of
from loadproof.report.headline import headline_lines
from loadproof.scenarios.lifecycle import verdict_of
from loadproof.scenarios.live import LiveStatus

OutOption = Annotated[Path, typer.Option(help="where run directories go")]


class CliConsole:
    """The run lifecycle's console (`scenarios.lifecycle.Console`): rich, stderr for status, stdout for results.

    By default a run ends with its headline (`report.headline`); `verbose` (`loadproof -v ...`) prints every
    table after it, as report.md has them."""

    verbose = False

    def say(self, text: str) -> None:
        ui.err.print(text, markup=False, highlight=False)

    def live(self, status: LiveStatus) -> AbstractContextManager[object]:
        return ui.LiveView(status)

    def brief_live(self, status: LiveStatus) -> AbstractContextManager[object]:
        """A run inside a series: its progress in place on a terminal; elsewhere a line now and then, no
        phase lines (the series says one line per run)."""
        return ui.LiveView(status, every_s=ui.BRIEF_EVERY_S, phase_lines=False)

    def show(self, report: Report) -> None:
        show(report, verbose=self.verbose)

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        ui.table(title, header, rows)

    def result(self, text: str) -> None:
        ui.out.print(text, markup=False, highlight=False)


console = CliConsole()


@app.callback()
def verbosity(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="print every table of a run, not only its headline")
    ] = False,
) -> None:
    """Verified capacity, honest comparison and checkable publication for self-hosted LLMs."""
    console.verbose = verbose


def show(report: Report, verbose: bool = False) -> None:
    """A run's headline (at most about ten lines: the decision first), then, when `verbose`, every table: the
    scenario's own (its report panels with a console title), the acceptance criteria with their evidence,
    every other figure."""
    failures = report.failures
    decision = decision_of(report)
    for text in headline_lines(report, verbose_hint=not verbose):
        style = "yellow" if text.startswith("warning:") else None
        if text == decision:
            bad = failures.measured_nothing or " FAIL" in text
            style = "bold red" if bad else "bold yellow" if failures.failed else "bold"
        ui.out.print(text, style=style, markup=False, highlight=False)
    if verbose:
        show_tables(report)


def show_tables(report: Report) -> None:
    """Every table of a run, as report.md has them."""
    claims = report.claims
    failures = report.failures
    tables = [(t.console, t) for t in tables_of(report.panels) if t.console]
    for title, table in tables:
        ui.table(title, table.header, table.rows)
    criteria = criteria_rows(claims)
    if criteria:
        ui.table(
            f"{report.run.manifest.scenario} acceptance: {verdict_of(claims)}",
            ["criterion", "status", "evidence"],
            [list(row) for row in criteria],
        )
    shown = {name for _, table in tables for name in table.claims}
    figures = [c for c in claims if c.kind not in ACCEPTANCE and c.name not in shown]
    dist_header, dist_rows, figures = distribution_table(figures)
    if dist_rows:
        ui.table("Distributions (std, p95, p99.9 in report.md)", dist_header, dist_rows)
    if figures:
        ui.table("Figures", ["claim", "value", "unit"], [[c.name, c.printed, c.unit] for c in figures])
    ui.err.print(
        failures.line(),
        style="yellow" if failures.failed else None,
        markup=False,
        highlight=False,
    )
    ui.out.print(
        f"claims: {report.run.path / 'claims.json'}\nreport: {report.run.path / 'report.md'}",
        markup=False,
        highlight=False,
    )


def show_report(run_path: Path) -> None:
    show(build_report(run_path), verbose=console.verbose)


def with_serving(profile: Profile, eager: bool, port: int | None) -> Profile:
    update: dict[str, Any] = {}
    if eager:
        update["enforce_eager"] = True
    if port is not None:
        update["port"] = port
    if not update:
        return profile
    return profile.model_copy(update={"serving": profile.serving.model_copy(update=update)})


def print_command(argv: list[str], env: dict[str, str]) -> None:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    ui.out.print((prefix + " " if prefix else "") + shlex.join(argv), markup=False, highlight=False, soft_wrap=True)
