"""`report.html`: a run's page, one self-contained file: what the run is, its verdict and headline figures,
its acceptance, its figures drawn from the run data, the scenario's tables, the latency percentiles, every
claim (folded), telemetry.

Nothing is fetched when the page opens: no script, no web font, no external stylesheet or image; CSS
and SVG are inline (`report.page`). Each figure derives only from the run directory: the scenario's plots
and headline are its report panels (its metrics module's `figures`, named in its catalog entry;
`metrics.figures` types), drawn here the same way whichever scenario made them, then the TTFT distribution
of any run that has none among them; a figure whose data the run lacks is left out. The text is the
Markdown report's (report.md), section by section, so the two never say different things. Every text taken
from the run (manifest fields, names, errors) is escaped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from html import escape

from loadproof.metrics.claims import Claim
from loadproof.metrics.figures import TTFT_CDF, BarPlot, Histogram, LinePlot, Mark, Panel, headline_of
from loadproof.metrics.interval_text import TOO_FEW, interval_notes
from loadproof.report.distributions import distribution_table
from loadproof.report.page import Drawn, document, figure_html, figures_section, fold, slug, summary_html, toc
from loadproof.report.plots import line_chart, telemetry_svg
from loadproof.report.plots_bars import bar_chart, histogram_chart
from loadproof.report.svg import CHART_WIDTH, HALF_WIDTH, Whisker
from loadproof.store.run_dir import Run

NS = 1_000_000_000
FULL_WIDTH = 960  # a full-width figure's drawing; half-width ones are drawn HALF_WIDTH wide
CLAIMS, TELEMETRY, ACCEPTANCE, NOTHING = "Claims", "Telemetry", "Acceptance", "Measured nothing"


def render_html(run: Run, markdown: str, panels: Sequence[Panel] = (), claims: Sequence[Claim] = ()) -> str:
    """The page: report.md's sections, rearranged for a reader: the header and anything measured-nothing
    first; the verdict and the headline figures (a `Headline` among `panels`); acceptance; the figures (the
    scenario's plots among `panels`, then a TTFT distribution where they have none); the scenario's tables;
    the latency percentiles of `claims` in one table; every claim, folded; telemetry."""
    images = {"telemetry.svg": telemetry_svg(run.telemetry)}
    top, sections = split_sections(markdown)
    title = f"loadproof run {run.run_id}"
    header = markdown_to_html(top, images).replace(
        f"<h1>{escape(title, quote=False)}</h1>",
        f'<h1>loadproof run <span class="name">{escape(run.run_id, quote=False)}</span></h1>',
        1,
    )
    by_title = dict(sections)
    verdict = next((t.partition(": ")[2] for t, _ in sections if t.startswith(ACCEPTANCE + ":")), None)
    if NOTHING in by_title:
        verdict = verdict or "NOTHING MEASURED"
    drawn = figures(run, panels)
    links = [(_id(t), t.partition(":")[0]) for t, _ in sections if t not in (CLAIMS, TELEMETRY, NOTHING)]
    dist_header, dist_rows, _ = distribution_table(list(claims), interval_notes(claims))
    links = (
        links[:1] * any(t.startswith(ACCEPTANCE) for t, _ in sections)
        + [("figures", "Figures")] * bool(drawn)
        + [link for link in links if not link[1].startswith(ACCEPTANCE)]
        + [("percentiles", "Latency percentiles")] * bool(dist_rows)
        + [(_id(t), t) for t in (CLAIMS, TELEMETRY) if t in by_title]
    )
    body = ['<header class="top">', header, toc(links), "</header>"]
    if NOTHING in by_title:
        body.append(_section(NOTHING, by_title[NOTHING], images))
    body.append(summary_html(headline_of(panels), verdict))
    body += [_section(t, text, images) for t, text in sections if t.startswith(ACCEPTANCE)]
    body.append(figures_section(drawn))
    body += [
        _section(t, text, images)
        for t, text in sections
        if t not in (CLAIMS, TELEMETRY, NOTHING) and not t.startswith(ACCEPTANCE)
    ]
    if dist_rows:
        table = "| " + " | ".join(dist_header) + " |\n|" + "---|" * len(dist_header) + "\n"
        table += "".join("| " + " | ".join(row) + " |\n" for row in dist_rows)
        body.append(
            '<section id="percentiles">\n<h2>Latency percentiles</h2>\n'
            + markdown_to_html(
                "Each row: one latency's claims, each figure with its 95% interval in brackets where it has "
                "one (std, p95 and p99.9 among the claims below).\n\n" + table,
                {},
            )
            + "\n</section>"
        )
    if CLAIMS in by_title:
        count = sum(1 for line in by_title[CLAIMS].splitlines() if line.startswith("| `"))
        content = markdown_to_html(by_title[CLAIMS], images)
        body.append(fold("claims", CLAIMS, f"{count} claims, each with its unit and formula: click to open", content))
    if TELEMETRY in by_title:
        body.append(_section(TELEMETRY, by_title[TELEMETRY], images))
    return document(title, [part for part in body if part])


def split_sections(markdown: str) -> tuple[str, list[tuple[str, str]]]:
    """(the text before the first `## ` heading, [(heading, the section's text below it)])."""
    parts = re.split(r"^## (.*)$", markdown, flags=re.M)
    return parts[0], [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts) - 1, 2)]


def _id(title: str) -> str:
    return slug(title.partition(":")[0])


def _section(title: str, text: str, images: dict[str, str]) -> str:
    return f'<section id="{_id(title)}">\n<h2>{_inline(title)}</h2>\n{markdown_to_html(text, images)}\n</section>'


# --- the Markdown subset report.md uses: headings, lists, tables, paragraphs, `code`, images ---------

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")
_NUMBER = re.compile(r"^[-+]?(\d[\d,]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s?%?$")
# a figure and its interval (metrics/interval_text.py): `0.1780 [0.1520, 0.2120]`, `0.27 (n too small ...)`
_WITH_INTERVAL = re.compile(r"^(\S+) (\[[-+\d.,e ]+\](?: at \d+%)?|\(" + re.escape(TOO_FEW) + r"\))$")


def _inline(text: str) -> str:
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text, quote=False))
    return re.sub(r"^_(.+)_$", r"<em>\1</em>", html)


_PIPE = re.compile(r"(?<!\\)\|")  # a cell separator: a | not escaped as \|


def table_cell(text: object) -> str:
    """A table cell of report.md: its text on one line, each `|` in it escaped as `\\|` (GitHub's Markdown
    reads it so too), so an error's text or a formula such as `|a - b|` stays one cell."""
    return _PIPE.sub(r"\\|", " ".join(str(text).splitlines()))


def _cells(line: str) -> list[str]:
    """A table row's cells, split at the pipes that are not escaped; an escaped one is a `|` in its cell."""
    row = line.strip().removeprefix("|")
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip().replace("\\|", "|") for c in _PIPE.split(row)]


def table_data(cell: str, label: str) -> str:
    """A cell: figures right-aligned and named by `label` (their column's header) where a narrow window
    stacks the row; prose (evidence, formulas) in a column wide enough to read; a verdict coloured; other
    words as they are."""
    if cell in ("PASS", "FAIL"):
        return f'<td class="{cell.lower()}">{cell}</td>'
    if _NUMBER.match(cell):
        return f'<td class="num" data-label="{escape(label)}">{_inline(cell)}</td>'
    interval = _WITH_INTERVAL.match(cell)
    if interval and _NUMBER.match(interval.group(1)):
        figure, bounds = interval.groups()
        return (
            f'<td class="num" data-label="{escape(label)}">{_inline(figure)} '
            f'<span class="interval">{escape(bounds, quote=False)}</span></td>'
        )
    if len(cell) > 16 and " " in cell:
        return f'<td class="text">{_inline(cell)}</td>'
    return f"<td>{_inline(cell)}</td>"


def markdown_to_html(text: str, images: dict[str, str]) -> str:
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>\n" + "\n".join(items) + "\n</ul>")
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            body = [r for r in rows[1:] if not set(r) <= set("|-: ")]
            html = [
                '<div class="table"><table>',
                "<tr>" + "".join(f"<th>{_inline(c)}</th>" for c in _cells(rows[0])) + "</tr>",
            ]
            labels = [c.strip("`") for c in _cells(rows[0])]
            html += [
                "<tr>"
                + "".join(table_data(c, labels[k] if k < len(labels) else "") for k, c in enumerate(_cells(r)))
                + "</tr>"
                for r in body
            ]
            out.append("\n".join(html + ["</table></div>"]))
        elif image := _IMAGE.match(line.strip()):
            alt, src = image.groups()
            svg = images.get(src)
            out.append(figure_html(Drawn(svg, alt, slug(src.rsplit(".", 1)[0]))) if svg else f"<p>[{escape(alt)}]</p>")
            i += 1
        else:
            para = []
            while (
                i < len(lines)
                and lines[i].strip()
                and not lines[i].startswith(("#", "- ", "|"))
                and not _IMAGE.match(lines[i].strip())
            ):
                para.append(_inline(lines[i]))
                i += 1
            out.append("<p>" + "\n".join(para) + "</p>")
    return "\n".join(out)


# --- figures: the scenario's plots (its report panels), then the TTFT distribution of any run ----------


def figures(run: Run, panels: Sequence[Panel] = ()) -> list[Drawn]:
    """The scenario's plots, drawn; then a TTFT distribution, unless a panel is one (`TTFT_CDF`)."""
    out = [figure for figure in (plot_figure(p) for p in panels) if figure is not None]
    has_ttft = any(isinstance(p, LinePlot) and p.key == TTFT_CDF for p in panels)
    return out + ([] if has_ttft else ttft_figure(run))


def plot_figure(panel: Panel) -> Drawn | None:
    """A plot panel drawn (None: a table or a headline, or a plot without data)."""
    if not isinstance(panel, (LinePlot, BarPlot, Histogram)):
        return None
    width = HALF_WIDTH if panel.half else FULL_WIDTH
    if isinstance(panel, LinePlot):
        svg = line_chart(
            panel.title,
            [(s.name, s.points) for s in panel.series],
            panel.x_label,
            panel.y_label,
            spans=[(s.start, s.end, s.label, s.color) for s in panel.spans],
            marks=[(m.x, m.label) for m in panel.marks],
            intervals=intervals(panel.marks),
            levels=[(level.y, level.label) for level in panel.levels],
            y_intervals=[(bar.x, bar.low, bar.high) for bar in panel.error_bars],
            clouds=[i for i, s in enumerate(panel.series) if not s.line],
            colours=[s.color for s in panel.series],
            step=panel.step,
            y_from_zero=panel.y_from_zero,
            x_from_zero=panel.x_from_zero,
            dots=panel.dots,
            x_whole=panel.x_whole,
            width=width,
        )
    elif isinstance(panel, BarPlot):
        svg = bar_chart(
            panel.title,
            panel.groups,
            [(b.name, b.values) for b in panel.series],
            panel.y_label,
            panel.x_label,
            width=width,
        )
    else:
        svg = histogram_chart(
            panel.title,
            panel.edges,
            panel.counts,
            panel.x_label,
            panel.y_label,
            marks=[(m.x, m.label) for m in panel.marks],
            intervals=intervals(panel.marks),
            width=width,
        )
    return Drawn(svg, panel.caption, panel.key or slug(panel.title), panel.half) if svg else None


def intervals(marks: Sequence[Mark]) -> list[Whisker]:
    """The whiskers of the marks that carry an interval: (low, high, the height to draw it at)."""
    return [(m.low, m.high, m.at) for m in marks if m.low is not None and m.high is not None]


def ttft_figure(run: Run) -> list[Drawn]:
    """Empirical CDF of TTFT over requests with a first token, one line per family (arm, for ab runs)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in run.records:
        if r.ttft_ns is not None:
            groups[r.family or r.scenario or "requests"].append(r.ttft_ns / NS)
    total = sum(len(v) for v in groups.values())
    if total < 2:
        return []
    series = []
    for name, values in groups.items():
        values.sort()
        series.append(
            (
                f"{name} (n={len(values)})",
                [(values[0], 0.0)] + [(v, (i + 1) / len(values)) for i, v in enumerate(values)],
            )
        )
    svg = line_chart(
        f"TTFT distribution ({total} requests)",
        series,
        "time to first token, s",
        "fraction of requests at or below",
        step=True,
        x_from_zero=True,
        width=CHART_WIDTH,
    )
    caption = (
        "Empirical CDF of t_first_token - t_send over every request that produced a first token "
        "(streams cancelled after it included)."
    )
    return [Drawn(svg, caption, TTFT_CDF)] if svg else []
