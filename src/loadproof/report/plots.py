"""Plots as small self-contained SVG (no plotting library needed to write or read a report).

The telemetry panels (also written as telemetry.svg), and the generic line and grouped-bar charts the
HTML report draws its figures with (`report.html`). Every text that could come from data is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from loadproof.rundir import TelemetrySample

PANEL_HEIGHT = 150  # one telemetry panel: title, plot, time axis


def _series(rows: list[TelemetrySample]) -> list[tuple[str, str, list[tuple[float, float]]]]:
    t0 = rows[0].t_ns
    out = []
    cpu = [((r.t_ns - t0) / 1e9, r.host.cpu_busy_pct) for r in rows if r.host.cpu_busy_pct is not None]
    if cpu:
        out.append(("host CPU busy", "%", cpu))
    outside = [((r.t_ns - t0) / 1e9, r.host.cpu_outside_pct) for r in rows if r.host.cpu_outside_pct is not None]
    if outside:  # what else on the machine competed with the run
        out.append(("host CPU used outside loadproof", "%", outside))
    if any(r.gpus for r in rows):
        temp: list[tuple[float, float]] = [
            ((r.t_ns - t0) / 1e9, max(g.temp_c for g in r.gpus if g.temp_c is not None))
            for r in rows
            if r.gpus and all(g.temp_c is not None for g in r.gpus)
        ]
        power = [
            ((r.t_ns - t0) / 1e9, sum(g.power_w for g in r.gpus if g.power_w is not None))
            for r in rows
            if r.gpus and all(g.power_w is not None for g in r.gpus)
        ]
        if temp:
            out.append(("hottest GPU", "°C", temp))
        if power:
            out.append(("GPU power, all GPUs", "W", power))
    return out


def telemetry_svg(rows: list[TelemetrySample]) -> str:
    """One panel per series (host CPU, the part outside loadproof, hottest GPU, GPU power), each with its
    scale, unit and time axis."""
    if len(rows) < 2:
        return ""
    rows = sorted(rows, key=lambda r: r.t_ns)
    panels = _series(rows)
    if not panels:
        return ""
    height = PANEL_HEIGHT * len(panels)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{height}" '
        f'viewBox="0 0 {CHART_WIDTH} {height}" font-family="sans-serif" font-size="11">'
    ]
    for i, (title, unit, points) in enumerate(panels):
        top = i * PANEL_HEIGHT
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        x_max, y_max = max(xs), max(ys)
        y_min = min(0.0, min(ys))
        frame = Frame((0.0, x_max), (y_min, y_max + 0.05 * (y_max - y_min)), top + 26, height=top + PANEL_HEIGHT)
        path = " ".join(f"{frame.x(x):.1f},{frame.y(y):.1f}" for x, y in points)
        parts.append(
            f'<text x="8" y="{top + 16}" font-weight="bold">{escape(title)} ({escape(unit)}); '
            f"max {y_max:.1f}, over {x_max:.0f} s</text>"
        )
        parts += frame.axes("seconds since the first sample", unit)
        parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{path}"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# --- generic charts for the HTML report: hand-written SVG, every text escaped ---------------------------

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
CHART_WIDTH, CHART_HEIGHT = 720, 300
MAX_LEGEND = 12  # more series than this: the legend says how many instead of naming each


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

    def axes(self, x_label: str, y_label: str, x_ticks: bool = True) -> list[str]:
        out = []
        for t in nice_ticks(self.y0, self.y1):
            if self.y0 <= t <= self.y1:
                out.append(
                    f'<line x1="{self.left}" y1="{self.y(t):.1f}" x2="{self.right}" y2="{self.y(t):.1f}" '
                    'stroke="#e5e5e5"/>'
                )
                out.append(f'<text x="{self.left - 6}" y="{self.y(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
        if x_ticks:
            for t in nice_ticks(self.x0, self.x1, 8):
                if self.x0 <= t <= self.x1:
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


def _open(title: str, names: list[str], width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> tuple[list[str], int]:
    """The svg element, its title and legend; returns the parts and the y where the plot area starts."""
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
        parts.append(f'<rect x="{x}" y="{top}" width="10" height="10" fill="{color(i)}"/>')
        parts.append(f'<text x="{x + 14}" y="{top + 9}">{label}</text>')
        x += 24 + 7 * len(name)
    return parts, top + 24


Points = list[tuple[float, float]]
CHAR_WIDTH = 6.5  # a generous estimate of one character's width at font-size 11, to keep labels apart
LABEL_ROW = 13


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


def line_chart(
    title: str,
    series: list[tuple[str, Points]],
    x_label: str,
    y_label: str,
    *,
    spans: Sequence[tuple[float, float, str, str]] = (),
    marks: Sequence[tuple[float, str]] = (),
    step: bool = False,
    y_from_zero: bool = True,
    x_from_zero: bool = False,
    dots: bool = False,
    height: int = CHART_HEIGHT,
) -> str:
    """Lines (or steps) of (x, y) points; `spans` shade (x0, x1, label, colour), `marks` draw labelled vertical lines.

    The labels of spans and marks sit in a band above the data (the y range grows to make room), kept
    inside the plot and apart. `dots` marks each point, the first series' dots larger, so that arms
    with equal figures stay visible one behind the other.
    """
    series = [(name, pts) for name, pts in series if pts]
    if not series:
        return ""
    xs = (
        [x for _, pts in series for x, _ in pts] + [s[0] for s in spans] + [s[1] for s in spans] + [m[0] for m in marks]
    )
    ys = [y for _, pts in series for _, y in pts]
    parts, top = _open(title, [name for name, _ in series], height=height)
    y_low = min(0.0, min(ys)) if y_from_zero else min(ys)
    y_high = max(ys) + 0.05 * (max(ys) - y_low)
    x_range = (min(0.0, min(xs)) if x_from_zero else min(xs), max(xs))
    if step:  # a step's last rise would sit on the plot's right edge, unseen
        x_range = (x_range[0], x_range[1] + 0.03 * (x_range[1] - x_range[0]))
    frame = Frame(x_range, (y_low, y_high), top, height=height)
    texts = [(frame.x(x0) + 3, frame.x(x1) - 3, label) for x0, x1, label, _ in spans]
    texts += [(frame.x(x) + 3, frame.x(x) - 3, label) for x, label in marks]
    placed = place_labels(texts, frame.left, frame.right)
    if placed:  # room above the data for the label rows
        band = LABEL_ROW * (1 + max(row for _, row, _ in placed)) + 4
        share = min(band / (frame.bottom - frame.top), 0.5)
        frame = Frame(x_range, (y_low, frame.y0 + (frame.y1 - frame.y0) / (1 - share)), top, height=height)
    for x0, x1, _, fill in spans:
        parts.append(
            f'<rect x="{frame.x(x0):.1f}" y="{frame.top}" width="{max(frame.x(x1) - frame.x(x0), 1.0):.1f}" '
            f'height="{frame.bottom - frame.top}" fill="{fill}" fill-opacity="0.18"/>'
        )
    parts += frame.axes(x_label, y_label)
    for x, _ in marks:
        parts.append(
            f'<line x1="{frame.x(x):.1f}" y1="{frame.top}" x2="{frame.x(x):.1f}" y2="{frame.bottom}" '
            'stroke="#d62728" stroke-dasharray="4 3"/>'
        )
    labels = [(label, "#333") for _, _, label, _ in spans] + [(label, "#d62728") for _, label in marks]
    for (x, row, anchor), (label, fill) in zip(placed, labels):
        parts.append(
            f'<text x="{x:.1f}" y="{frame.top + 11 + LABEL_ROW * row}" text-anchor="{anchor}" '
            f'fill="{fill}">{escape(label)}</text>'
        )
    for i, (_, pts) in enumerate(series):
        coords = []
        for j, (x, y) in enumerate(pts):
            if step and j:
                coords.append(f"{frame.x(x):.1f},{frame.y(pts[j - 1][1]):.1f}")
            coords.append(f"{frame.x(x):.1f},{frame.y(y):.1f}")
        parts.append(f'<polyline fill="none" stroke="{color(i)}" stroke-width="1.5" points="{" ".join(coords)}"/>')
        if dots:
            radius = 4.5 if i == 0 else 2.5
            parts += [
                f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="{radius}" fill="{color(i)}"/>' for x, y in pts
            ]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def bar_chart(
    title: str,
    groups: list[str],
    series: list[tuple[str, list[float | None]]],
    y_label: str,
    x_label: str = "",
    height: int = CHART_HEIGHT,
) -> str:
    """Grouped bars: one group per entry of `groups`, one bar per series (None: no bar), value printed on top."""
    values = [v for _, vals in series for v in vals if v is not None]
    if not groups or not values:
        return ""
    parts, top = _open(title, [name for name, _ in series], height=height)
    frame = Frame((0.0, float(len(groups))), (0.0, max(values) * 1.1), top, height=height)
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


def scatter_chart(
    title: str, series: list[tuple[str, list[tuple[float, float, str]]]], x_label: str, y_label: str
) -> str:
    """Labelled points (x, y, label), one colour a series; both axes from 0. The first series' labels are
    drawn beside its points (later series share the labels of the points they sit on)."""
    series = [(name, pts) for name, pts in series if pts]
    if not series:
        return ""
    parts, top = _open(title, [name for name, _ in series])
    xs = [x for _, pts in series for x, _, _ in pts]
    ys = [y for _, pts in series for _, y, _ in pts]
    frame = Frame((0.0, max(xs) * 1.15), (0.0, max(ys) * 1.15), top)
    parts += frame.axes(x_label, y_label)
    for i, (_, pts) in enumerate(series):
        for x, y, label in pts:
            parts.append(
                f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="{5 if i == 0 else 3.5}" '
                f'fill="{color(i)}" fill-opacity="{0.35 if i == 0 else 1}"/>'
            )
            if i == 0:
                parts.append(
                    f'<text x="{frame.x(x) + 7:.1f}" y="{frame.y(y) + 4:.1f}" font-size="9">{escape(label)}</text>'
                )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
