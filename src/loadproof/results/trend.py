"""`loadproof history CLAIM --html FILE`: the claim over time on one self-contained page (report.page: inline SVG
and CSS, no script, nothing fetched), drawn with report.svg's frame, legend and error bars.

Each run is a point, the runs evenly spaced in the order they started (labelled with start times: a run a minute
after another and one a month later are both readable), one colour a profile, joined in time order; its interval
(where claims.json gave one) a vertical whisker; each point links to its run (its report.html where there is one, else its folder),
relative to the page so the folder can move together. Below, the same runs as a table with the same links.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC
from html import escape
from pathlib import Path

from loadproof.report.page import Drawn, document, figure_html
from loadproof.report.svg import Frame, color, error_bars, open_svg
from loadproof.results.history import TIME, History, Point

REPORT = "report.html"
WIDTH = 960  # wider than a report's chart: a history has many runs
TICK_SPACING = 100  # px between start-time labels (one is about 72 px wide)


def link(point: Point, page: Path) -> str:
    """Where a point links: its run's report.html (else its folder), relative to the page's folder."""
    run = Path(point.run.path)
    target = run / REPORT if (run / REPORT).is_file() else run
    try:
        return Path(os.path.relpath(target, page.resolve().parent)).as_posix()
    except ValueError:  # another drive (Windows): the absolute path
        return target.as_uri() if target.is_absolute() else target.as_posix()


def series_of(points: Sequence[Point]) -> list[tuple[str, list[Point]]]:
    """The points by profile (a run without one: `no profile`), in the order each profile first appears."""
    groups: dict[str, list[Point]] = {}
    for point in points:
        groups.setdefault(point.run.profile or "no profile", []).append(point)
    return list(groups.items())


def chart(found: History, page: Path) -> str:
    """The SVG: each run at its place in time order (evenly spaced, labelled with start times), whiskers for
    intervals, every point a link with its run and figure as a tooltip."""
    points = found.numeric
    if not points:
        return ""
    at = {id(p): i for i, p in enumerate(points)}  # oldest first: the history's order
    groups = series_of(points)
    unit = points[0].claim.unit
    parts, top = open_svg(f"{found.claim} over time", [name for name, _ in groups], width=WIDTH)
    ys = [float(p.claim.value) for p in points]
    ys += [b for p in points for b in (p.claim.low, p.claim.high) if b is not None]
    low, high = min(0.0, min(ys)), max(ys)
    frame = Frame((-0.5, len(points) - 0.5), (low, high + 0.08 * ((high - low) or abs(high) or 1.0)), top, WIDTH)
    y_label = found.claim + (f" ({unit})" if unit else "")
    parts += frame.axes("runs in the order they started (UTC)", y_label, x_ticks=False)
    parts += _time_ticks(frame, points)
    bars = [(at[id(p)], p.claim.low, p.claim.high) for p in points if p.claim.low is not None]
    parts += error_bars(frame, [(x, lo, hi) for x, lo, hi in bars if hi is not None])
    for i, (_, members) in enumerate(groups):
        coords = " ".join(f"{frame.x(at[id(p)]):.1f},{frame.y(float(p.claim.value)):.1f}" for p in members)
        if len(members) > 1:
            parts.append(f'<polyline fill="none" stroke="{color(i)}" stroke-width="1.5" points="{coords}"/>')
        for p in members:
            parts.append(
                f'<a href="{escape(link(p, page))}"><circle class="point" data-run="{escape(p.run.run_id)}" '
                f'cx="{frame.x(at[id(p)]):.1f}" cy="{frame.y(float(p.claim.value)):.1f}" r="4.5" fill="{color(i)}">'
                f"<title>{escape(p.run.run_id)}: {escape(p.value_text)}</title></circle></a>"
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _time_ticks(frame: Frame, points: Sequence[Point]) -> list[str]:
    """Start times under the x axis at evenly chosen runs, as many as fit apart (a date alone where the runs
    span more than a few days)."""
    times = [p.run.started_at.astimezone(UTC) for p in points]
    fmt = "%Y-%m-%d" if (times[-1] - times[0]).days > 5 else "%m-%d %H:%M"
    room = max(1, int((frame.right - frame.left) / TICK_SPACING))
    step = max(1, -(-len(points) // room))
    out = []
    for i in range(0, len(points), step):
        x = frame.x(i)
        out.append(
            f'<text x="{x:.1f}" y="{frame.bottom + 14}" text-anchor="middle">{escape(times[i].strftime(fmt))}</text>'
        )
        out.append(f'<line x1="{x:.1f}" y1="{frame.bottom}" x2="{x:.1f}" y2="{frame.bottom + 4}" stroke="#555"/>')
    return out


def imported(point: Point) -> str:
    """` (imported then)` for a run dated by its import: its file states no date (docs/import.md)."""
    return " (imported then: its file states no date)" if point.run.dated_by_import else ""


def table_html(found: History, page: Path) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in ["time (UTC)", "run", "value [low, high]", "profile", "model"])
    head += "<th>engine version</th><th>interval method</th>"
    body = []
    for p in reversed(found.points):  # newest first, as a reader scans for the latest
        cells = [
            f"<td>{escape(p.run.started_at.astimezone(UTC).strftime(TIME) + imported(p))}</td>",
            f'<td><a href="{escape(link(p, page))}"><code>{escape(p.run.run_id)}</code></a></td>',
            f'<td class="num">{escape(p.value_text)}</td>',
            f"<td>{escape(p.run.profile or '')}</td>",
            f"<td>{escape(p.run.model or '')}</td>",
            f"<td>{escape(p.run.engine_version or '')}</td>",
            f"<td>{escape(p.claim.method or '')}</td>",
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="table"><table>\n<tr>{head}</tr>\n' + "\n".join(body) + "\n</table></div>"


def page_html(found: History, page: Path) -> str:
    """The whole page for `found`, its links relative to where it will be written (`page`)."""
    points = found.points
    first, last = points[0].run.started_at, points[-1].run.started_at
    with_interval = sum(p.claim.has_interval for p in points)
    note = (
        f"{len(points)} run(s) from {first.astimezone(UTC).strftime(TIME)} to {last.astimezone(UTC).strftime(TIME)}"
        f" UTC ({found.conditions}), {with_interval} with an interval; results store {found.store}."
    )
    svg = chart(found, page)
    figure = (
        figure_html(
            Drawn(
                svg,
                "Each point is a run (click it to open the run), in the order the runs started; the whisker is the claim's "
                "interval where the run gave one; one colour per profile.",
                "history",
            )
        )
        if svg
        else '<p class="note">Not a number: the claim is a text or a yes/no, listed below.</p>'
    )
    body = [
        f'<header class="top"><h1>loadproof history: <code>{escape(found.claim)}</code></h1></header>',
        f'<p class="note">{escape(note)}</p>',
        f'<section id="trend">\n<h2>Over time</h2>\n{figure}\n</section>',
        f'<section id="runs">\n<h2>Runs</h2>\n{table_html(found, page)}\n</section>',
    ]
    return document(f"loadproof history: {found.claim}", body)


def write_page(found: History, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page_html(found, path), encoding="utf-8")
    return path
