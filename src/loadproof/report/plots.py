"""Telemetry plots as small self-contained SVG files (no plotting library needed to read a report)."""

from __future__ import annotations

from typing import Any

WIDTH, HEIGHT, PAD = 640, 140, 36


def _series(rows: list[dict[str, Any]]) -> list[tuple[str, str, list[tuple[float, float]]]]:
    t0 = rows[0]["t_ns"]
    out = []
    cpu = [((r["t_ns"] - t0) / 1e9, r["host"]["cpu_busy_pct"]) for r in rows
           if r.get("host", {}).get("cpu_busy_pct") is not None]
    if cpu:
        out.append(("host CPU busy", "%", cpu))
    if any(r.get("gpus") for r in rows):
        temp = [((r["t_ns"] - t0) / 1e9, max(g["temp_c"] for g in r["gpus"])) for r in rows
                if r.get("gpus") and all(g.get("temp_c") is not None for g in r["gpus"])]
        power = [((r["t_ns"] - t0) / 1e9, sum(g["power_w"] for g in r["gpus"])) for r in rows
                 if r.get("gpus") and all(g.get("power_w") is not None for g in r["gpus"])]
        if temp:
            out.append(("hottest GPU", "C", temp))
        if power:
            out.append(("GPU power, all GPUs", "W", power))
    return out


def telemetry_svg(rows: list[dict[str, Any]]) -> str:
    if len(rows) < 2:
        return ""
    rows = sorted(rows, key=lambda r: r["t_ns"])
    panels = _series(rows)
    if not panels:
        return ""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT * len(panels)}" '
             'font-family="sans-serif" font-size="11">']
    for i, (title, unit, points) in enumerate(panels):
        top = i * HEIGHT
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        x_max = max(xs) or 1.0
        y_min, y_max = min(0.0, min(ys)), max(ys) or 1.0
        def px(x: float) -> float:
            return PAD + (WIDTH - 2 * PAD) * x / x_max
        def py(y: float) -> float:
            return top + HEIGHT - PAD + (-(HEIGHT - 2 * PAD) * (y - y_min) / ((y_max - y_min) or 1.0))
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts += [
            f'<text x="{PAD}" y="{top + 16}">{title} ({unit}); max {y_max:.1f}, over {x_max:.0f} s</text>',
            f'<line x1="{PAD}" y1="{py(y_min):.1f}" x2="{WIDTH - PAD}" y2="{py(y_min):.1f}" stroke="#999"/>',
            f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{path}"/>',
        ]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
