"""report.md and report.html of a load sweep or a rate search folder: the table of its points or trials
and, for a sweep, latency-vs-rate and goodput-vs-rate curves (inline SVG, as the run reports draw theirs).

Each point's x is its rate: the rate asked for a point at a constant rate; for the synchronous and the
throughput point of `--sweep auto`, which ask none, the request rate they achieved
(`load.request_throughput_rps`).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from loadproof.report.html import CSS, markdown_to_html
from loadproof.report.plots import line_chart
from loadproof.rundir.series import SweepPoint

REPORT, REPORT_HTML = "report.md", "report.html"
LATENCY_SVG, E2EL_SVG, GOODPUT_SVG = "latency.svg", "e2el.svg", "goodput.svg"


def point_x(point: SweepPoint) -> float | None:
    """Where a sweep point sits on the rate axis."""
    if point.rate_rps is not None:
        return point.rate_rps
    value = point.request_throughput_rps
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _curve(points: Sequence[SweepPoint], key: str) -> list[tuple[float, float]]:
    pts = [(point_x(p), p.figure(key)) for p in points]
    return sorted(
        (x, float(y)) for x, y in pts if x is not None and isinstance(y, (int, float)) and not isinstance(y, bool)
    )


def sweep_figures(points: Sequence[SweepPoint]) -> dict[str, str]:
    """{file name: svg} of the sweep's curves (a curve with fewer than two points is left out)."""
    out = {}
    latency = [
        (name, _curve(points, key))
        for name, key in (("TTFT p50", "ttft_p50_s"), ("TTFT p99", "ttft_p99_s"), ("ITL p99", "itl_p99_s"))
    ]
    latency = [(n, c) for n, c in latency if len(c) >= 2]
    if latency:
        out[LATENCY_SVG] = line_chart(
            "Latency vs rate: TTFT p50, TTFT p99, ITL p99",
            latency,
            "requests/s",
            "seconds",
            dots=True,
            x_from_zero=True,
        )
    e2el = _curve(points, "e2el_p50_s")
    if len(e2el) >= 2:
        out[E2EL_SVG] = line_chart(
            "Latency vs rate: E2EL p50", [("E2EL p50", e2el)], "requests/s", "seconds", dots=True, x_from_zero=True
        )
    rates = [
        (name, _curve(points, key))
        for name, key in (("goodput (met every SLO)", "goodput_rps"), ("completed", "request_throughput_rps"))
    ]
    rates = [(n, c) for n, c in rates if len(c) >= 2]
    if rates:
        out[GOODPUT_SVG] = line_chart(
            "Goodput vs rate", rates, "requests/s asked", "requests/s", dots=True, x_from_zero=True
        )
    return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def write_series_report(
    folder: Path,
    title: str,
    intro: list[str],
    header: list[str],
    rows: list[list[str]],
    figures: dict[str, str],
    claims: Sequence[Any] = (),
) -> None:
    """report.md (with the figures as SVG files beside it) and report.html (one self-contained page)."""
    lines = [f"# {title}", ""] + [f"- {line}" for line in intro] + [""] + _table(header, rows)
    captions = {LATENCY_SVG: "latency vs rate", E2EL_SVG: "end-to-end latency vs rate", GOODPUT_SVG: "goodput vs rate"}
    if figures:
        lines += [
            "",
            "## Curves",
            "",
            "Each point at its rate: the rate asked, or, for a synchronous or throughput "
            "point, the request rate it achieved.",
            "",
        ]
        for name, svg in figures.items():
            (folder / name).write_text(svg, encoding="utf-8")
            lines += [f"![{captions.get(name, name)}]({name})", ""]
    if claims:
        lines += ["", "## Claims", ""] + _table(
            ["name", "value", "unit", "formula"], [[f"`{c.name}`", c.printed, c.unit, c.formula] for c in claims]
        )
    markdown = "\n".join(lines).rstrip() + "\n"
    (folder / REPORT).write_text(markdown, encoding="utf-8")
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + markdown_to_html(markdown, figures)
        + "\n</body>\n</html>\n"
    )
    (folder / REPORT_HTML).write_text(page, encoding="utf-8")
