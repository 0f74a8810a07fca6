"""`index.html` of a folder of runs (`loadproof report FOLDER`, where FOLDER holds run directories and series
folders): one row per run or series, linking its report.html, with its scenario, its verdict and one key
figure (the first of its headline), so a reader finds the run to open.

A run's row comes from its report, rebuilt from its records (`build_report`): its scenario, its verdict (or
that it measured nothing), and its headline's first figure. A series' row (a load rate search, a sweep, a
capacity search) from its summary file, read through its type (`store.series`): its result line and the
rate or value it found; its report.html is the one its command or `loadproof report` wrote. A folder that
is neither is left out. Self-contained like every page (`report.page`).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

from loadproof.errors import LoadproofError
from loadproof.metrics.claims import verdict_of
from loadproof.metrics.figures import headline_of
from loadproof.report.build import REPORT_HTML, Report, build_report
from loadproof.report.page import document, verdict_class
from loadproof.rundir.series import RATE_SEARCH_KIND, SWEEP_KIND
from loadproof.store.run_dir import MANIFEST
from loadproof.store.series import SEARCH_JSON, SWEEP_JSON, read_capacity_search, read_rate_search, read_sweep

INDEX_HTML = "index.html"


@dataclass(frozen=True)
class IndexRow:
    name: str  # the folder's name, relative to the index
    kind: str  # the scenario, or the series' kind
    verdict: str  # PASS, FAIL, NOTHING MEASURED, a series' outcome; "" where there is none
    figure: str  # one key figure, printed with its unit and label
    note: str = ""  # a line more: the run's requests, a series' result
    started: str = ""


def is_runs_folder(folder: Path) -> bool:
    """Whether `folder` is no run directory itself but holds at least one run directory or series folder."""
    if not folder.is_dir():  # a missing path is the run directory's reader's to name (one line, exit 2)
        return False
    return not (folder / MANIFEST).is_file() and any(kind_of(child) for child in _children(folder))


def _children(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def kind_of(path: Path) -> str | None:
    """'run', 'series' or None (neither)."""
    if (path / MANIFEST).is_file():
        return "run"
    if (path / SEARCH_JSON).is_file() or (path / SWEEP_JSON).is_file():
        return "series"
    return None


def run_row(report: Report, name: str) -> IndexRow:
    """A run's row, from its report: scenario, verdict, the headline's first figure."""
    run, failures = report.run, report.failures
    verdict = verdict_of(report.claims)
    said = "NOTHING MEASURED" if failures.headline() is not None else (verdict.printed if verdict else "")
    first = headline_of(report.panels)
    figure = ""
    if first is not None and first.figures:
        key = first.figures[0]
        figure = f"{key.printed} {key.unit}".strip() + (f" ({key.label})" if key.label != key.unit else "")
    return IndexRow(
        name, run.manifest.scenario or "", said, figure, failures.line(), run.manifest.start_wall_time or ""
    )


def series_row(folder: Path) -> IndexRow:
    """A series' row, from its summary file."""
    name = folder.name
    if (folder / SWEEP_JSON).is_file():
        sweep = read_sweep(folder / SWEEP_JSON)
        done = f"{len(sweep.points)} of {sweep.points_planned} points"
        return IndexRow(name, SWEEP_KIND.replace("-", " "), "" if sweep.completed else "INTERRUPTED", done, sweep.sweep)
    try:
        search = read_rate_search(folder / SEARCH_JSON)
    except LoadproofError:  # a capacity search's summary
        capacity = read_capacity_search(folder / SEARCH_JSON)
        found = capacity.largest_pass
        return IndexRow(
            name,
            f"capacity search ({capacity.parameter})",
            "LOWER BOUND" if capacity.lower_bound else ("FOUND" if found is not None else "NONE PASSED"),
            f"{found} ({capacity.parameter}, largest passing)" if found is not None else "",
            capacity.result or "",
        )
    rate = search.max_rate_rps
    verdict = "NONE PASSED" if rate is None else ("LOWER BOUND" if search.lower_bound else "FOUND")
    figure = (
        ""
        if rate is None
        else f"{rate:g} requests/s ({'at least' if search.lower_bound else 'highest meeting the SLO'})"
    )
    return IndexRow(name, RATE_SEARCH_KIND.replace("-", " "), verdict, figure, search.result or "")


def build_index(folder: Path) -> list[IndexRow]:
    """Write `folder`/index.html: a row per run directory (its report rebuilt from its records) and per series
    folder directly under it. Returns the rows."""
    rows = []
    for child in _children(folder):
        kind = kind_of(child)
        try:
            if kind == "run":
                rows.append(run_row(build_report(child), child.name))
            elif kind == "series":
                rows.append(series_row(child))
        except LoadproofError as error:  # one unreadable folder is a row saying so, not a lost index
            rows.append(IndexRow(child.name, kind or "", "UNREADABLE", "", str(error)))
    (folder / INDEX_HTML).write_text(index_html(folder.name, rows), encoding="utf-8")
    return rows


def index_html(title: str, rows: list[IndexRow]) -> str:
    """The page: a table of the rows, each name linking its report.html."""
    body = [
        f'<header class="top"><h1>loadproof runs in <span class="name">{escape(title)}</span></h1>',
        f'<p class="note">{len(rows)} runs and series; each name opens its report (report.html).</p></header>',
        '<div class="table"><table id="runs">',
        "<tr><th>run</th><th>scenario</th><th>verdict</th><th>key figure</th><th>started</th><th>notes</th></tr>",
    ]
    for row in rows:
        href = f"{escape(row.name)}/{REPORT_HTML}"
        body.append(
            f'<tr><td><a href="{href}"><code>{escape(row.name)}</code></a></td><td>{escape(row.kind)}</td>'
            f'<td class="{verdict_class(row.verdict)}">{escape(row.verdict)}</td>'
            f'<td class="text">{escape(row.figure)}</td><td>{escape(row.started)}</td>'
            f'<td class="text">{escape(row.note)}</td></tr>'
        )
    body.append("</table></div>")
    return document(f"loadproof runs in {title}", body)
