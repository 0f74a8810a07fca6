"""Bars as self-contained SVG for the HTML report: grouped bars (a value per group and series) and
histograms (counts in bins along a value axis, percentiles marked). Every text from data is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from loadproof.report.svg import (
    CHART_HEIGHT,
    CHART_WIDTH,
    MARK_COLOUR,
    Frame,
    Whisker,
    band_bottom,
    band_frame,
    band_labels,
    color,
    mark_lines,
    open_svg,
    whiskers,
)


def bar_chart(
    title: str,
    groups: list[str],
    series: list[tuple[str, list[float | None]]],
    y_label: str,
    x_label: str = "",
    width: int = CHART_WIDTH,
    height: int = CHART_HEIGHT,
) -> str:
    """Grouped bars: one group per entry of `groups`, one bar per series (None: no bar), value printed on top."""
    values = [v for _, vals in series for v in vals if v is not None]
    if not groups or not values:
        return ""
    parts, top = open_svg(title, [name for name, _ in series], width=width, height=height)
    frame = Frame((0.0, float(len(groups))), (0.0, max(values) * 1.1), top, width=width, height=height)
    parts += frame.axes(x_label, y_label, x_ticks=False)
    slot = (frame.right - frame.left) / len(groups)
    bar = slot * 0.8 / max(len(series), 1)
    for g, group in enumerate(groups):
        x_group = frame.left + g * slot + slot * 0.1
        parts.append(
            f'<text x="{frame.left + (g + 0.5) * slot:.1f}" y="{frame.bottom + 14}" '
            f'text-anchor="middle">{escape(group)}</text>'
        )
        for i, (_, vals) in enumerate(series):
            v = vals[g] if g < len(vals) else None
            if v is None:
                continue
            x = x_group + i * bar
            parts.append(
                f'<rect x="{x:.1f}" y="{frame.y(v):.1f}" width="{bar * 0.9:.1f}" '
                f'height="{frame.bottom - frame.y(v):.1f}" fill="{color(i)}"/>'
            )
            parts.append(
                f'<text x="{x + bar * 0.45:.1f}" y="{frame.y(v) - 3:.1f}" text-anchor="middle" '
                f'font-size="10">{v:.1f}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def histogram_chart(
    title: str,
    edges: Sequence[float],
    counts: Sequence[int],
    x_label: str,
    y_label: str,
    *,
    marks: Sequence[tuple[float, str]] = (),
    intervals: Sequence[Whisker] = (),
    width: int = CHART_WIDTH,
    height: int = CHART_HEIGHT,
) -> str:
    """Counts in bins: bin i spans [edges[i], edges[i+1]) on a value axis; `marks` draw labelled vertical lines
    (a percentile, say), their labels in a band above the bars; `intervals` whiskers across them (a
    percentile's interval: low, high, the height in counts or None for just under the labels)."""
    if not counts or len(edges) != len(counts) + 1 or not any(counts):
        return ""
    parts, top = open_svg(title, [], width=width, height=height)
    xs = [*edges, *(x for x, _ in marks), *(x for low, high, _ in intervals for x in (low, high))]
    frame = Frame((min(xs), max(xs)), (0.0, max(counts) * 1.08), top, width=width, height=height)
    frame, placed = band_frame(frame, [(frame.x(x) + 3, frame.x(x) - 3, label) for x, label in marks], width, height)
    parts += frame.axes(x_label, y_label)
    for lo, hi, n in zip(edges, edges[1:], counts):
        if n:
            parts.append(
                f'<rect x="{frame.x(lo):.1f}" y="{frame.y(n):.1f}" width="{max(frame.x(hi) - frame.x(lo) - 1, 1.0):.1f}" '
                f'height="{frame.bottom - frame.y(n):.1f}" fill="{color(0)}" fill-opacity="0.8"/>'
            )
    parts += mark_lines(frame, [x for x, _ in marks])
    parts += band_labels(frame, placed, [(label, MARK_COLOUR) for _, label in marks])
    parts += whiskers(frame, intervals, band_bottom(frame, placed))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
