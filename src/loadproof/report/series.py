"""report.md and report.html of a load sweep or a rate search folder: the result and headline figures, the
curves (`metrics.series_figures`: a search's attainment and TTFT against the rate, the target, the SLO and
the rate found or its lower bound; a sweep's latency and goodput against the rate), the whole table of its
points or trials, each run linked to its own report, and the search's claims, folded.

report.md links each curve as an SVG file beside it (`<key>.svg`); report.html holds them inline, on a page
built like a run's (`report.page`), so it opens offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from loadproof.metrics.figures import Panel, headline_of
from loadproof.metrics.interval_text import interval_notes, with_interval
from loadproof.report.html import markdown_to_html, plot_figure, table_data
from loadproof.report.page import Drawn, document, figures_section, fold, summary_html

REPORT, REPORT_HTML = "report.md", "report.html"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def write_series_report(
    folder: Path,
    title: str,
    intro: list[str],
    header: list[str],
    rows: list[list[str]],
    panels: Sequence[Panel] = (),
    claims: Sequence[Any] = (),
    outcome: str | None = None,
) -> None:
    """report.md (with the curves as SVG files beside it) and report.html (one self-contained page). A row's
    last cell is its run directory, inside `folder`, which report.html links. `outcome`: the word the page
    shows above its figures (FOUND, LOWER BOUND, ...), None for none."""
    drawn = [d for d in (plot_figure(p) for p in panels) if d is not None]
    lines = [f"# {title}", ""] + [f"- {line}" for line in intro] + [""] + _table(header, rows)
    if drawn:
        lines += [
            "",
            "## Curves",
            "",
            "Each point at its rate: the rate asked, or, for a synchronous or throughput "
            "point, the request rate it achieved.",
            "",
        ]
        for d in drawn:
            (folder / f"{d.key}.svg").write_text(d.svg, encoding="utf-8")
            lines += [f"![{d.caption}]({d.key}.svg)", ""]
    if claims:
        lines += ["", "## Claims", ""] + _claims_table(claims)
    markdown = "\n".join(lines).rstrip() + "\n"
    (folder / REPORT).write_text(markdown, encoding="utf-8")
    (folder / REPORT_HTML).write_text(
        series_html(title, intro, header, rows, drawn, panels, claims, outcome), encoding="utf-8"
    )


def series_html(
    title: str,
    intro: list[str],
    header: list[str],
    rows: list[list[str]],
    drawn: Sequence[Drawn],
    panels: Sequence[Panel],
    claims: Sequence[Any],
    outcome: str | None,
) -> str:
    """The page: title and intro, the outcome and headline, the curves, the table (every column, every row,
    each run linked), the claims folded."""
    body = [
        f'<header class="top"><h1>{escape(title)}</h1>',
        markdown_to_html("\n".join(f"- {line}" for line in intro), {}),
        "</header>",
        summary_html(headline_of(panels), outcome),
        figures_section(list(drawn), "Curves"),
        '<section id="trials">\n<h2>Every run of the series</h2>',
        '<div class="table"><table class="wide">',
        "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>",
    ]
    body += [
        "<tr>" + "".join(_cell(c, header[k], k == len(row) - 1) for k, c in enumerate(row)) + "</tr>" for row in rows
    ]
    body.append("</table></div>\n</section>")
    if claims:
        table = _claims_table(claims)
        body.append(
            fold("claims", "Claims", f"{len(claims)} claims of the series", markdown_to_html("\n".join(table), {}))
        )
    return document(title, body)


def _claims_table(claims: Sequence[Any]) -> list[str]:
    """The series' claims, each figure with its 95% interval where it has one (`metrics.interval_text`)."""
    notes = interval_notes(claims)
    return _table(
        ["name", "value", "unit", "formula"],
        [[f"`{c.name}`", with_interval(c, notes), c.unit, c.formula] for c in claims],
    )


def _cell(text: str, label: str, is_run: bool) -> str:
    """A table cell: the run directory linked to its report, every other cell as a run page's tables show it."""
    if is_run and text:
        return f'<td><a href="{escape(text)}/{REPORT_HTML}"><code>{escape(text)}</code></a></td>'
    return table_data(text, label)
