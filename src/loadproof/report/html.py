"""`report.html`: the Markdown report as one self-contained page, plus figures drawn from the run data.

Nothing is fetched when the page opens: no script, no web font, no external stylesheet or image; CSS
and SVG are inline. Each figure derives only from the run directory: the scenario's plots are its
report panels (its metrics module's `figures`, named in its catalog entry; `metrics.figures` types),
drawn here the same way whichever scenario made them, then the TTFT distribution of any run; a figure
whose data the run lacks is left out. Every text taken from the run (manifest fields, names, errors)
is escaped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from html import escape

from loadproof.metrics.figures import BarPlot, LinePlot, Panel
from loadproof.report.plots import bar_chart, line_chart, telemetry_svg
from loadproof.store.run_dir import Run

NS = 1_000_000_000

Figure = tuple[str, str]  # (svg, caption)

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 980px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.table { overflow-x: auto; margin: 0.8em 0; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; } td.num { text-align: right; white-space: nowrap; } td.text { min-width: 14em; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.92em; }
td code, .name { white-space: nowrap; }
figure { margin: 1.2em 0; } figcaption { font-size: 0.88em; color: #555; max-width: 720px; }
svg { max-width: 100%; height: auto; background: #fff; }
@media (max-width: 720px) {  /* a narrow window: each row a block, figures named by their column */
  .table table, .table tbody, .table tr { display: block; }
  .table tr:first-child { display: none; }
  .table tr { border: 1px solid #ccc; margin-bottom: 0.4em; padding: 3px 8px; }
  .table td { display: inline-block; border: none; padding: 1px 0.7em 1px 0; text-align: left; min-width: 0; }
  .table td:first-child, .table td.text { display: block; }
  .table td:empty { display: none; }
  .table td.num::before { content: attr(data-label) ": "; color: #666; }
}
"""


def render_html(run: Run, markdown: str, panels: Sequence[Panel] = ()) -> str:
    """The page: the Markdown report's content, with a Figures section before its claims table (the
    scenario's plots among `panels`, then the TTFT distribution)."""
    images = {"telemetry.svg": telemetry_svg(run.telemetry)}
    head, sep, tail = markdown.partition("\n## Claims\n")
    title = f"<h1>loadproof run {escape(run.run_id, quote=False)}</h1>"
    body = [
        markdown_to_html(head, images).replace(
            title, f'<h1>loadproof run <span class="name">{escape(run.run_id, quote=False)}</span></h1>', 1
        )
    ]
    figs = figures(run, panels)
    if figs:
        body.append("<h2>Figures</h2>")
        body += [f"<figure>\n{svg}<figcaption>{escape(caption)}</figcaption>\n</figure>" for svg, caption in figs]
    if sep:
        body.append(markdown_to_html("## Claims\n" + tail, images))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>loadproof run {escape(run.run_id)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


# --- the Markdown subset report.md uses: headings, lists, tables, paragraphs, `code`, images ---------

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")
_NUMBER = re.compile(r"^[-+]?(\d[\d,]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s?%?$")


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


def _td(cell: str, label: str) -> str:
    """A cell: figures right-aligned and named by `label` (their column's header) where a narrow window
    stacks the row; prose (evidence, formulas) in a column wide enough to read; other words as they are."""
    if _NUMBER.match(cell):
        return f'<td class="num" data-label="{escape(label)}">{_inline(cell)}</td>'
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
                + "".join(_td(c, labels[k] if k < len(labels) else "") for k, c in enumerate(_cells(r)))
                + "</tr>"
                for r in body
            ]
            out.append("\n".join(html + ["</table></div>"]))
        elif image := _IMAGE.match(line.strip()):
            alt, src = image.groups()
            svg = images.get(src)
            out.append(
                f"<figure>\n{svg}<figcaption>{escape(alt)}</figcaption>\n</figure>"
                if svg
                else f"<p>[{escape(alt)}]</p>"
            )
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


def figures(run: Run, panels: Sequence[Panel] = ()) -> list[Figure]:
    out = [figure for figure in (plot_figure(p) for p in panels) if figure is not None]
    return out + ttft_figure(run)


def plot_figure(panel: Panel) -> Figure | None:
    """A plot panel drawn (None: a table, or a plot without data)."""
    if isinstance(panel, LinePlot):
        svg = line_chart(
            panel.title,
            [(s.name, s.points) for s in panel.series],
            panel.x_label,
            panel.y_label,
            spans=[(s.start, s.end, s.label, s.color) for s in panel.spans],
            marks=[(m.x, m.label) for m in panel.marks],
            step=panel.step,
            y_from_zero=panel.y_from_zero,
            x_from_zero=panel.x_from_zero,
            dots=panel.dots,
        )
    elif isinstance(panel, BarPlot):
        svg = bar_chart(
            panel.title, panel.groups, [(b.name, b.values) for b in panel.series], panel.y_label, panel.x_label
        )
    else:
        return None
    return (svg, panel.caption) if svg else None


def ttft_figure(run: Run) -> list[Figure]:
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
    )
    return (
        [
            (
                svg,
                "Empirical CDF of t_first_token - t_send over every request that produced a first token "
                "(streams cancelled after it included).",
            )
        ]
        if svg
        else []
    )
