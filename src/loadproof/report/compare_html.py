"""`loadproof compare ... --out FILE.html`: the comparison as one self-contained page: the decision first
(ACCEPT, REJECT, NO VERDICT) with its reasons, the sides' latency distributions overlaid (each side's TTFT,
ITL, TPOT and E2E latency as an empirical CDF on one plot, `metrics.latency_figures.overlaid_panels`), then
the Markdown comparison's change table, answers and notes, as `render_markdown` writes them.
"""

from __future__ import annotations

from html import escape

from loadproof.metrics.latency_figures import overlaid_panels
from loadproof.report.compare import ACCEPT, REJECT, Comparison
from loadproof.report.compare_markdown import render_markdown
from loadproof.report.html import markdown_to_html, plot_figure
from loadproof.report.page import document, figures_section

WORDS = {ACCEPT: "PASS", REJECT: "FAIL"}  # the decision's colour: a verdict's


def render_compare_html(comparison: Comparison) -> str:
    """The page (module doc)."""
    sides = [(f"{bc.baseline.label} (B{i})", bc.baseline) for i, bc in enumerate(comparison.baselines, 1)]
    sides.append((f"{comparison.candidate.label} (candidate)", comparison.candidate))
    panels = overlaid_panels([(label, [r for run in side.runs for r in run.records]) for label, side in sides])
    drawn = [d for d in (plot_figure(p) for p in panels) if d is not None]
    markdown = render_markdown(comparison)
    decision = comparison.verdict
    kind = {"PASS": "pass", "FAIL": "fail"}.get(WORDS.get(decision, ""), "none")
    reasons = "".join(f"<li>{escape(r)}</li>" for r in comparison.reasons)
    body = [
        '<header class="top"><h1>loadproof compare</h1></header>',
        f'<section class="summary" id="summary"><div class="verdict {kind}">{escape(decision)}</div></section>',
        f'<ul class="note">{reasons}</ul>' if reasons else "",
        figures_section(drawn, "Distributions, side by side"),
        '<section id="comparison">\n<h2>Change against every baseline</h2>',
        markdown_to_html(markdown.split("\n", 1)[1], {}),
        "</section>",
    ]
    return document(f"loadproof compare: {decision}", body)
