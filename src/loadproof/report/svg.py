"""What every chart of the reports is drawn with: hand-written SVG, no plotting library, every text escaped.

The colours, round tick values, the frame that maps data to pixels and draws the axes, the svg element with
its title and legend, and the placing of labels in a band above the data so that none overlaps another.
The charts themselves are in `report.plots` (lines, telemetry, labelled points) and `report.plots_bars`
(grouped bars, histograms).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
CHART_WIDTH, CHART_HEIGHT = 720, 300
HALF_WIDTH = 560  # a chart drawn to sit two to a row on a wide page
MAX_LEGEND = 12  # more series than this: the legend says how many instead of naming each
CHAR_WIDTH = 6.5  # a generous estimate of one character's width at font-size 11, to keep labels apart
LABEL_ROW = 13
MARK_COLOUR = "#d62728"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    if not hi > lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    ticks, t = [], math.ceil(lo / step - 1e-9) * step
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    return ticks


class Frame:
    """Maps data to pixels inside a chart; draws the axes, grid and labels."""

    def __init__(
        self,
        x_range: tuple[float, float],
        y_range: tuple[float, float],
        top: int,
        width: int = CHART_WIDTH,
        height: int = CHART_HEIGHT,
    ) -> None:
        self.x0, self.x1 = x_range if x_range[1] > x_range[0] else (x_range[0], x_range[0] + 1.0)
        self.y0, self.y1 = y_range if y_range[1] > y_range[0] else (y_range[0], y_range[0] + 1.0)
        self.left, self.right, self.top, self.bottom = 64, width - 16, top, height - 40

    def x(self, v: float) -> float:
        return self.left + (self.right - self.left) * (v - self.x0) / (self.x1 - self.x0)

    def y(self, v: float) -> float:
        return self.bottom - (self.bottom - self.top) * (v - self.y0) / (self.y1 - self.y0)

    def axes(self, x_label: str, y_label: str, x_ticks: bool = True, x_whole: bool = False) -> list[str]:
        """Grid, tick labels (on x only whole numbers when `x_whole`: turns, streams, rounds), axes, labels."""
        out = []
        for t in nice_ticks(self.y0, self.y1):
            if self.y0 <= t <= self.y1:
                out.append(
                    f'<line x1="{self.left}" y1="{self.y(t):.1f}" x2="{self.right}" y2="{self.y(t):.1f}" '
                    'stroke="#e5e5e5"/>'
                )
                out.append(f'<text x="{self.left - 6}" y="{self.y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
        if x_ticks:  # about one label per 80 px, so that the widest stay apart
            for t in nice_ticks(self.x0, self.x1, max(3, min(8, int((self.right - self.left) / 80)))):
                half = CHAR_WIDTH * len(f"{t:g}") / 2  # a label reaching under the y axis's labels, or out: none
                inside = self.x(t) - half >= self.left - 4 and self.x(t) + half <= self.right + 14
                if self.x0 <= t <= self.x1 and (not x_whole or t == int(t)) and inside:
                    out.append(f'<text x="{self.x(t):.1f}" y="{self.bottom + 14}" text-anchor="middle">{t:g}</text>')
        out += [
            f'<line x1="{self.left}" y1="{self.bottom}" x2="{self.right}" y2="{self.bottom}" stroke="#555"/>',
            f'<line x1="{self.left}" y1="{self.top}" x2="{self.left}" y2="{self.bottom}" stroke="#555"/>',
            f'<text x="{(self.left + self.right) / 2:.0f}" y="{self.bottom + 32}" text-anchor="middle">'
            f"{escape(x_label)}</text>",
            f'<text transform="translate(14,{(self.top + self.bottom) / 2:.0f}) rotate(-90)" '
            f'text-anchor="middle">{escape(y_label)}</text>',
        ]
        return out


def open_svg(
    title: str,
    names: list[str],
    width: int = CHART_WIDTH,
    height: int = CHART_HEIGHT,
    colours: Sequence[str] = (),
) -> tuple[list[str], int]:
    """The svg element, its title and legend (each name in `colours`' colour, by default the palette's);
    returns the parts and the y where the plot area starts."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img">',
        f"<title>{escape(title)}</title>",
        f'<text x="8" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    top = 28
    if len(names) > MAX_LEGEND:
        parts.append(f'<text x="8" y="{top + 8}">{len(names)} series, one colour each (cycled)</text>')
        return parts, top + 22
    x = 8
    for i, name in enumerate(names):
        label = escape(name)
        if x + 24 + 7 * len(name) > width:
            x, top = 8, top + 14
        fill = colours[i] if i < len(colours) else color(i)
        parts.append(f'<rect x="{x}" y="{top}" width="10" height="10" fill="{fill}"/>')
        parts.append(f'<text x="{x + 14}" y="{top + 9}">{label}</text>')
        x += 24 + 7 * len(name)
    return parts, top + 24


def place_labels(labels: Sequence[tuple[float, float, str]], left: float, right: float) -> list[tuple[float, int, str]]:
    """(x, row, text-anchor) of each (x_start, x_end, text) label in a band of rows above the plot.

    A label starts at x_start, or ends at x_end where it would leave the plot at the right; it goes one
    row down where it would overlap a label already placed in its row.
    """
    placed: list[tuple[int, float, float]] = []
    out = []
    for start, end, text in labels:
        width = CHAR_WIDTH * len(text)
        if start + width <= right:
            lo, x, anchor = start, start, "start"
        else:
            lo, x, anchor = max(left, end - width), end, "end"
        hi = lo + width
        row = 0
        while any(r == row and lo < h + 4 and left < hi + 4 for r, left, h in placed):
            row += 1
        placed.append((row, lo, hi))
        out.append((x, row, anchor))
    return out


def band_frame(
    frame: Frame, texts: Sequence[tuple[float, float, str]], width: int, height: int
) -> tuple[Frame, list[tuple[float, int, str]]]:
    """The frame grown upwards to leave a band of label rows above the data, and where each label goes
    (`place_labels`); the frame as it was when there is no label."""
    placed = place_labels(texts, frame.left, frame.right)
    if not placed:
        return frame, placed
    band = LABEL_ROW * (1 + max(row for _, row, _ in placed)) + 4
    share = min(band / (frame.bottom - frame.top), 0.5)
    grown = Frame(
        (frame.x0, frame.x1), (frame.y0, frame.y0 + (frame.y1 - frame.y0) / (1 - share)), frame.top, width, height
    )
    return grown, placed


def band_labels(frame: Frame, placed: Sequence[tuple[float, int, str]], labels: Sequence[tuple[str, str]]) -> list[str]:
    """The text elements of labels placed in the band (`band_frame`), each (text, colour)."""
    return [
        f'<text x="{x:.1f}" y="{frame.top + 11 + LABEL_ROW * row}" text-anchor="{anchor}" '
        f'fill="{fill}">{escape(label)}</text>'
        for (x, row, anchor), (label, fill) in zip(placed, labels)
    ]


Whisker = tuple[float, float, float | None]  # an interval's (low, high) on the x axis, at a height (None: the top)


def band_bottom(frame: Frame, placed: Sequence[tuple[float, int, str]]) -> float:
    """The y just under the band of labels `band_frame` placed (the frame's top where there is none)."""
    return frame.top + 4 + LABEL_ROW * (1 + max((row for _, row, _ in placed), default=-1))


def whiskers(frame: Frame, bars: Sequence[Whisker], top: float) -> list[str]:
    """Each interval (low, high, at) as a horizontal error bar with end caps, at the height `at` in data units
    (None: `top` + 6 px), named by its bounds in a tooltip."""
    out = []
    for low, high, at in bars:
        x0, x1 = frame.x(low), frame.x(high)
        y = frame.y(at) if at is not None else top + 6
        out.append(
            f'<g class="whisker" stroke="{MARK_COLOUR}" stroke-width="2"><title>95% interval [{low:.4g}, {high:.4g}]'
            f'</title><line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}"/>'
            f'<line x1="{x0:.1f}" y1="{y - 4:.1f}" x2="{x0:.1f}" y2="{y + 4:.1f}"/>'
            f'<line x1="{x1:.1f}" y1="{y - 4:.1f}" x2="{x1:.1f}" y2="{y + 4:.1f}"/></g>'
        )
    return out


def error_bars(frame: Frame, bars: Sequence[tuple[float, float, float]]) -> list[str]:
    """Each interval (x, low, high) on the y axis as a vertical error bar with end caps, its bounds in a tooltip."""
    out = []
    for x, low, high in bars:
        at, y0, y1 = frame.x(x), frame.y(low), frame.y(high)
        out.append(
            f'<g class="whisker" stroke="#333" stroke-width="1.5"><title>95% interval [{low:.4g}, {high:.4g}]</title>'
            f'<line x1="{at:.1f}" y1="{y0:.1f}" x2="{at:.1f}" y2="{y1:.1f}"/>'
            f'<line x1="{at - 4:.1f}" y1="{y0:.1f}" x2="{at + 4:.1f}" y2="{y0:.1f}"/>'
            f'<line x1="{at - 4:.1f}" y1="{y1:.1f}" x2="{at + 4:.1f}" y2="{y1:.1f}"/></g>'
        )
    return out


def mark_lines(frame: Frame, xs: Sequence[float]) -> list[str]:
    """Dashed vertical lines at each x."""
    return [
        f'<line x1="{frame.x(x):.1f}" y1="{frame.top}" x2="{frame.x(x):.1f}" y2="{frame.bottom}" '
        f'stroke="{MARK_COLOUR}" stroke-dasharray="4 3"/>'
        for x in xs
    ]
