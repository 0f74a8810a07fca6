"""`loadproof report RUN`: recompute claims from the stored records, write claims.json and report.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim, claims_payload, criteria_of, criterion_name, verdict_of
from loadproof.metrics.figures import Panel, Table, panels_of, tables_of
from loadproof.metrics.fleet_figures import fleet_panels
from loadproof.metrics.interval_text import interval_notes, with_interval
from loadproof.metrics.reasoning import reasoning_panels, thinking_unheeded
from loadproof.report.failures import Failures, failures_of
from loadproof.report.html import render_html, table_cell
from loadproof.report.plots import telemetry_svg
from loadproof.store.run_dir import Run, load_run, write_claims

REPORT = "report.md"
INTERVALS_NOTE = (
    "A measured figure's 95% confidence interval stands beside it in brackets, `value [low, high]`, its bounds at "
    "the figure's printed precision (claims.json keeps each one's method; `loadproof verify` recomputes it)."
)
REPORT_HTML = "report.html"  # the same content, self-contained, with figures


@dataclass
class Report:
    run: Run
    claims: list[Claim]
    markdown: str
    panels: list[Panel] = field(default_factory=list)  # the scenario's (catalog entry `figures`)

    @property
    def warnings(self) -> list[str]:
        """What the run asked for and its figures do not show, said first (`run_warnings`)."""
        return run_warnings(self.run)

    @property
    def failures(self) -> Failures:
        """Its requests that failed, and whether it measured anything at all."""
        return failures_of(self.run)


def build_report(path: Path) -> Report:
    run = load_run(path)
    claims = compute_claims(run)
    write_claims(path, claims_payload(run.run_id, claims))
    panels = run_panels(run, claims)
    svg = telemetry_svg(run.telemetry)
    if svg:
        (path / "telemetry.svg").write_text(svg, encoding="utf-8")
    markdown = render_markdown(run, claims, with_plot=bool(svg), panels=panels)
    (path / REPORT).write_text(markdown, encoding="utf-8")
    (path / REPORT_HTML).write_text(render_html(run, markdown, panels, claims), encoding="utf-8")
    return Report(run=run, claims=claims, markdown=markdown, panels=panels)


def run_panels(run: Run, claims: list[Claim]) -> list[Panel]:
    """The scenario's report panels, then reasoning and answer apart where the run streamed reasoning, then a
    fleet's replicas where it measured several."""
    return panels_of(run, claims) + reasoning_panels(claims) + fleet_panels(run, claims)


def run_warnings(run: Run) -> list[str]:
    """What a run asked for that its figures do not show: thinking asked of a model whose answers streamed no
    reasoning. Known only from the answers, so said first in report.md and in the run's summary."""
    target = run.manifest.target
    unheeded = thinking_unheeded(target.thinking, target.reasoning_effort, run.records)
    return [unheeded] if unheeded else []


def criteria_rows(claims: list[Claim]) -> list[tuple[str, str, str]]:
    """(criterion, status, evidence) of every acceptance criterion among the claims."""
    return [(criterion_name(c), c.printed, c.formula) for c in criteria_of(claims)]


def render_markdown(run: Run, claims: list[Claim], with_plot: bool = False, panels: list[Panel] | None = None) -> str:
    """report.md: the run, its acceptance, each table among the scenario's report panels (`panels_of`
    when not given), every claim, telemetry."""
    m = run.manifest
    failures = failures_of(run)
    lines = [f"# loadproof run {run.run_id}", ""]
    headline = failures.headline()
    if headline is not None:  # first, before anything that reads as a measurement
        lines += ["## Measured nothing", "", _plain(headline[0].upper() + headline[1:]), ""]
    lines += [f"- warning: {warning}" for warning in run_warnings(run)]  # first: what the figures do not measure
    lines.append(f"- scenario: {m.scenario}; model: {m.target.model} via /{m.target.endpoint}")
    if m.engine_version:
        lines.append(f"- engine version: {m.engine_version}")
    startup = m.engine_startup
    if startup is not None and startup.line:
        lines.append(f"- engine startup report: `{startup.line}` (the engine's own figure, not measured capacity)")
    ended = "unfinished" if m.end_wall_time is None else m.end_wall_time
    lines.append(f"- started {m.start_wall_time}, ended {ended}; {_plain(failures.line())}")
    if run.num_torn_lines:
        lines.append(f"- {run.num_torn_lines} torn line(s) skipped (interrupted write)")
    if m.telemetry is not None and not m.telemetry.sampled:
        lines.append(f"- samples absent: {m.telemetry.note}; the claims that need them are absent, not zero")
    criteria = criteria_rows(claims)
    if criteria:
        verdict = verdict_of(claims)
        lines += [
            "",
            f"## Acceptance: {verdict.printed if verdict else '?'}",
            "",
            "| criterion | status | evidence |",
            "|---|---|---|",
        ]
        lines += [f"| {name} | {status} | {table_cell(evidence)} |" for name, status, evidence in criteria]
    for table in tables_of(run_panels(run, claims) if panels is None else panels):
        lines += ["", f"## {table.title}", ""] + table.intro + ([""] if table.intro else []) + table_lines(table)
    notes = interval_notes(claims)
    lines += ["", "## Claims", ""]
    if notes:
        lines += [INTERVALS_NOTE, ""]
    lines += ["| name | value | unit | formula |", "|---|---|---|---|"]
    lines += [
        f"| `{c.name}` | {table_cell(with_interval(c, notes))} | {c.unit} | {table_cell(c.formula)} |"
        for c in claims
        if c.kind != "criterion"
    ]
    if with_plot:
        note = run.manifest.telemetry.note if run.manifest.telemetry is not None else None
        lines += ["", "## Telemetry", "", "![telemetry over the run](telemetry.svg)"] + (["", note] if note else [])
    mismatch = _token_count_note(run)
    if mismatch:
        lines += ["", mismatch]
    return "\n".join(lines) + "\n"


def table_lines(table: Table) -> list[str]:
    return ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)] + [
        "| " + " | ".join(table_cell(c) for c in row) + " |" for row in table.rows
    ]


def _token_count_note(run: Run) -> str:
    pairs = [
        (r.output_tokens, r.client_output_tokens)
        for r in run.records
        if r.ok and r.output_tokens is not None and r.client_output_tokens is not None
    ]
    if not pairs:
        return ""
    server = sum(p[0] for p in pairs)
    client = sum(p[1] for p in pairs)
    diff = (client - server) / server * 100 if server else 0.0
    return (
        f"Output tokens: server usage {server}, client tokenizer re-count {client} ({diff:+.1f}%); "
        "rates use the server's count. Re-tokenizing decoded text can merge or split tokens."
    )


def _plain(text: str) -> str:
    """Text taken from a run (an engine's error) as it was said, on one line, with no code span opened: the
    one mark report.html reads inside a line."""
    return " ".join(text.split()).replace("`", "'")
