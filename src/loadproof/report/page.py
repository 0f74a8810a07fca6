"""The page every report.html is built on: one self-contained HTML document, its style, and the parts the
run, series and index pages share: the headline cards and the verdict, the grid of figures, a section that
folds.

Nothing is fetched when a page opens: no script, no web font, no external stylesheet or image; the style
is inline and every figure an inline SVG. Each figure is a `<figure class="plot">` with `data-plot` (its
stable key) and `id="fig-KEY"`, so a test or a reader finds a plot whatever its title says. Every text
handed in is escaped here, unless it is named `*_html` (already markup, built from escaped text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from loadproof.metrics.figures import Headline

CSS = """
:root { --ink: #1d232b; --muted: #5b6570; --line: #d9dee4; --soft: #f5f7f9; --pass: #1d7a3a; --fail: #b3261e; }
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1200px; margin: 0 auto;
       padding: 1.2em 24px 3em; color: var(--ink); line-height: 1.45; }
h1 { font-size: 1.45em; margin: 0.2em 0 0.3em; } h2 { font-size: 1.2em; margin-top: 1.6em;
     border-bottom: 1px solid var(--line); padding-bottom: 0.15em; }
header.top ul { margin: 0.2em 0 0.6em; padding-left: 1.2em; color: var(--muted); font-size: 0.92em; }
nav.toc { font-size: 0.9em; margin: 0.6em 0 0; color: var(--muted); }
nav.toc a { color: #1f5fa8; text-decoration: none; margin-right: 1em; white-space: nowrap; }
.summary { display: flex; flex-wrap: wrap; gap: 10px; align-items: stretch; margin: 1em 0 0.4em; }
.verdict { font-size: 1.5em; font-weight: 700; color: #fff; border-radius: 6px; padding: 0.35em 0.8em;
           display: flex; align-items: center; }
.verdict.pass { background: var(--pass); } .verdict.fail { background: var(--fail); }
.verdict.bound { background: #a8620a; } .verdict.none { background: var(--muted); font-size: 1.1em; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 0.35em 0.8em; background: var(--soft);
        min-width: 8.5em; }
.card .value { font-size: 1.3em; font-weight: 650; white-space: nowrap; }
.card .unit { font-size: 0.7em; font-weight: 400; color: var(--muted); margin-left: 0.2em; }
.card .label { font-size: 0.8em; color: var(--muted); }
.card .interval, td .interval { font-size: 0.8em; color: var(--muted); white-space: nowrap; }
td .interval { display: block; }
.note { color: var(--muted); font-size: 0.9em; margin: 0.2em 0 0.8em; }
.table { overflow-x: auto; margin: 0.8em 0; }
table { border-collapse: collapse; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; vertical-align: top; text-align: left; }
th { background: #eef1f4; } td.num { text-align: right; white-space: nowrap; } td.text { min-width: 14em; }
td.pass { color: var(--pass); font-weight: 600; } td.fail { color: var(--fail); font-weight: 600; }
td.bound { color: #a8620a; font-weight: 600; }
table.wide { font-size: 0.84em; } table.wide th, table.wide td { padding: 3px 5px; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.92em; }
td code, .name { white-space: nowrap; }
a { color: #1f5fa8; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px 20px; }
figure { margin: 1em 0; } .grid figure { margin: 0; }
figure.full { grid-column: 1 / -1; }
figcaption { font-size: 0.85em; color: var(--muted); max-width: 960px; }
svg { max-width: 100%; height: auto; background: #fff; }
details.fold { margin-top: 1.6em; }
details.fold > summary { cursor: pointer; list-style-position: outside; }
details.fold > summary h2 { display: inline; border: none; }
details.fold > summary .hint { color: var(--muted); font-size: 0.88em; margin-left: 0.6em; }
@media (max-width: 900px) { .grid { grid-template-columns: minmax(0, 1fr); } }
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


def document(title: str, body: Sequence[str]) -> str:
    """The whole page: its title, the inline style, the body's parts one after another."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


@dataclass(frozen=True)
class Drawn:
    """A figure drawn: its SVG, caption, stable key and whether it takes half the page's width."""

    svg: str
    caption: str
    key: str
    half: bool = False


def slug(text: str) -> str:
    """A key made of a title: lower case, words joined by '-', counts in brackets left out."""
    words = re.sub(r"\([^)]*\)", "", text.lower())
    return "-".join(re.findall(r"[a-z0-9]+", words))[:60] or "figure"


def unique_keys(drawn: Sequence[Drawn]) -> list[Drawn]:
    """The figures with each key made unique (a second `x` becomes `x-2`), so every id names one figure."""
    seen: dict[str, int] = {}
    out = []
    for d in drawn:
        n = seen.get(d.key, 0) + 1
        seen[d.key] = n
        out.append(d if n == 1 else Drawn(d.svg, d.caption, f"{d.key}-{n}", d.half))
    return out


def figure_html(drawn: Drawn) -> str:
    key = escape(drawn.key)
    size = "half" if drawn.half else "full"
    return (
        f'<figure class="plot {size}" id="fig-{key}" data-plot="{key}">\n{drawn.svg}'
        f"<figcaption>{escape(drawn.caption)}</figcaption>\n</figure>"
    )


def figures_section(drawn: Sequence[Drawn], heading: str = "Figures") -> str:
    """The figures under their heading, in a grid: half-width ones two to a row on a wide page."""
    if not drawn:
        return ""
    items = "\n".join(figure_html(d) for d in unique_keys(drawn))
    return f'<section id="figures">\n<h2>{escape(heading)}</h2>\n<div class="grid">\n{items}\n</div>\n</section>'


VERDICT_CLASSES = {"PASS": "pass", "FOUND": "pass", "FAIL": "fail", "NONE PASSED": "fail", "NOTHING MEASURED": "fail"}


def verdict_class(verdict: str | None) -> str:
    """The style of a verdict word: pass, fail, bound (a lower bound, an interruption), none."""
    if verdict in ("LOWER BOUND", "INTERRUPTED"):
        return "bound"
    return VERDICT_CLASSES.get(verdict or "", "none")


def summary_html(headline: Headline | None, verdict: str | None = None, verdict_note: str = "") -> str:
    """The verdict (where the run has one) and the headline figures, as cards in a row; `verdict_note` is
    what the verdict badge says under its word."""
    parts = []
    if verdict:
        title = f' title="{escape(verdict_note)}"' if verdict_note else ""
        parts.append(f'<div class="verdict {verdict_class(verdict)}"{title}>{escape(verdict)}</div>')
    for figure in headline.figures if headline else []:
        claim = f' title="{escape(figure.claim)}"' if figure.claim else ""
        unit = f'<span class="unit">{escape(figure.unit)}</span>' if figure.unit else ""
        interval = f'<div class="interval">{escape(figure.interval)}</div>' if figure.interval else ""
        parts.append(
            f'<div class="card"{claim}><div class="value">{escape(figure.printed)}{unit}</div>{interval}'
            f'<div class="label">{escape(figure.label)}</div></div>'
        )
    if not parts:
        return ""
    note = f'\n<p class="note">{escape(headline.note)}</p>' if headline and headline.note else ""
    return '<section class="summary" id="summary">\n' + "\n".join(parts) + "\n</section>" + note


def fold(section_id: str, heading: str, hint: str, content_html: str) -> str:
    """A section shown folded: its heading and a hint on the summary line, the content a click away."""
    return (
        f'<details class="fold" id="{escape(section_id)}">\n<summary><h2>{escape(heading)}</h2>'
        f'<span class="hint">{escape(hint)}</span></summary>\n{content_html}\n</details>'
    )


def toc(links: Sequence[tuple[str, str]]) -> str:
    """A line of links to the page's sections: (id, text) each."""
    if not links:
        return ""
    return '<nav class="toc">' + "".join(f'<a href="#{escape(i)}">{escape(t)}</a>' for i, t in links) + "</nav>"
