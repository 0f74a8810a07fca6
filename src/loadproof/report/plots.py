"""Plots as small self-contained SVG (no plotting library needed to write or read a report).

The telemetry panels (also written as telemetry.svg), and the line and labelled-point charts the HTML report
draws its figures with (`report.html`; grouped bars and histograms in `report.plots_bars`, what every chart
is drawn with in `report.svg`). Every text that could come from data is escaped.
"""

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
    error_bars,
    mark_lines,
    open_svg,
    whiskers,
)
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


Points = list[tuple[float, float]]
MARKERS = 50  # a series of points alone with at most this many is drawn as markers


def line_chart(
    title: str,
    series: list[tuple[str, Points]],
    x_label: str,
    y_label: str,
    *,
    spans: Sequence[tuple[float, float, str, str]] = (),
    marks: Sequence[tuple[float, str]] = (),
    intervals: Sequence[Whisker] = (),
    levels: Sequence[tuple[float, str]] = (),
    y_intervals: Sequence[tuple[float, float, float]] = (),
    clouds: Sequence[int] = (),
    colours: Sequence[str] = (),
    step: bool = False,
    y_from_zero: bool = True,
    x_from_zero: bool = False,
    dots: bool = False,
    x_whole: bool = False,
    width: int = CHART_WIDTH,
    height: int = CHART_HEIGHT,
) -> str:
    """Lines (or steps) of (x, y) points; `spans` shade (x0, x1, label, colour), `marks` draw labelled vertical
    lines, `intervals` whiskers across them (low, high, the height: `svg.whiskers`), `levels` labelled
    horizontal ones (y, label), `y_intervals` vertical error bars (x, low, high); the series whose index is in `clouds` are drawn as
    points alone (many: small and pale, one per request say; a few: markers), the others as lines; `colours`
    gives a series its own colour by index ("" or none: the palette's, by its place in the legend).

    The labels of spans and marks sit in a band above the data (the y range grows to make room), kept
    inside the plot and apart; a level's label sits at the left end of its line. `dots` marks each point,
    the first series' dots larger, so that arms with equal figures stay visible one behind the other.
    """
    drawn = [(i, name, pts) for i, (name, pts) in enumerate(series) if pts]
    if not drawn:
        return ""
    xs = [x for _, _, pts in drawn for x, _ in pts] + [s[0] for s in spans] + [s[1] for s in spans]
    xs += [m[0] for m in marks] + [x for low, high, _ in intervals for x in (low, high)]
    ys = [y for _, _, pts in drawn for _, y in pts] + [y for y, _ in levels]
    ys += [y for _, low, high in y_intervals for y in (low, high)]
    xs += [x for x, _, _ in y_intervals]
    fills = [colours[i] if i < len(colours) and colours[i] else color(n) for n, (i, _, _) in enumerate(drawn)]
    parts, top = open_svg(title, [name for _, name, _ in drawn], width=width, height=height, colours=fills)
    y_low = min(0.0, min(ys)) if y_from_zero else min(ys)
    y_high = max(ys) + 0.05 * (max(ys) - y_low)
    x_range = (min(0.0, min(xs)) if x_from_zero else min(xs), max(xs))
    if step:  # a step's last rise would sit on the plot's right edge, unseen
        x_range = (x_range[0], x_range[1] + 0.03 * (x_range[1] - x_range[0]))
    if clouds or dots:  # a marker on the plot's edge would be cut in half
        pad = 0.03 * (x_range[1] - x_range[0])
        x_range = (x_range[0] - pad, x_range[1] + pad)
    frame = Frame(x_range, (y_low, y_high), top, width=width, height=height)
    texts = [(frame.x(x0) + 3, frame.x(x1) - 3, label) for x0, x1, label, _ in spans]
    texts += [(frame.x(x) + 3, frame.x(x) - 3, label) for x, label in marks]
    frame, placed = band_frame(frame, texts, width, height)
    for x0, x1, _, fill in spans:
        parts.append(
            f'<rect x="{frame.x(x0):.1f}" y="{frame.top}" width="{max(frame.x(x1) - frame.x(x0), 1.0):.1f}" '
            f'height="{frame.bottom - frame.top}" fill="{fill}" fill-opacity="0.18"/>'
        )
    parts += frame.axes(x_label, y_label, x_whole=x_whole)
    parts += mark_lines(frame, [x for x, _ in marks])
    labels = [(label, "#333") for _, _, label, _ in spans] + [(label, MARK_COLOUR) for _, label in marks]
    parts += band_labels(frame, placed, labels)
    under_band = band_bottom(frame, placed)
    parts += whiskers(frame, intervals, under_band) + error_bars(frame, y_intervals)
    for y, label in levels:
        at = frame.y(y)
        text_y = at - 4 if at - 15 > under_band else at + 13
        parts.append(
            f'<line x1="{frame.left}" y1="{at:.1f}" x2="{frame.right}" y2="{at:.1f}" stroke="#444" '
            'stroke-dasharray="6 3"/>'
        )
        parts.append(_level_label(frame, drawn, label, text_y))
    for n, (i, _, pts) in enumerate(drawn):
        if i in clouds:
            radius, opacity = (4.5, 0.9) if len(pts) <= MARKERS else (1.8, 0.45)
            parts += [
                f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="{radius}" fill="{fills[n]}" '
                f'fill-opacity="{opacity}"/>'
                for x, y in pts
            ]
            continue
        coords = []
        for j, (x, y) in enumerate(pts):
            if step and j:
                coords.append(f"{frame.x(x):.1f},{frame.y(pts[j - 1][1]):.1f}")
            coords.append(f"{frame.x(x):.1f},{frame.y(y):.1f}")
        parts.append(f'<polyline fill="none" stroke="{fills[n]}" stroke-width="1.5" points="{" ".join(coords)}"/>')
        if dots:
            radius = 4.5 if n == 0 else 2.5
            parts += [
                f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="{radius}" fill="{fills[n]}"/>' for x, y in pts
            ]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _level_label(frame: Frame, drawn: Sequence[tuple[int, str, Points]], label: str, text_y: float) -> str:
    """A level's label at the end of its line (left or right) with fewer data points near it."""
    near = [frame.x(x) for _, _, pts in drawn for x, y in pts if abs(frame.y(y) - text_y) < 16]
    third = (frame.right - frame.left) / 3
    left = sum(x < frame.left + third for x in near)
    right = sum(x > frame.right - third for x in near)
    if left < right:
        return f'<text x="{frame.left + 4}" y="{text_y:.1f}" fill="#444">{escape(label)}</text>'
    return f'<text x="{frame.right - 4}" y="{text_y:.1f}" text-anchor="end" fill="#444">{escape(label)}</text>'


def scatter_chart(
    title: str, series: list[tuple[str, list[tuple[float, float, str]]]], x_label: str, y_label: str
) -> str:
    """Labelled points (x, y, label), one colour a series; both axes from 0. The first series' labels are
    drawn beside its points (later series share the labels of the points they sit on)."""
    series = [(name, pts) for name, pts in series if pts]
    if not series:
        return ""
    parts, top = open_svg(title, [name for name, _ in series])
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
