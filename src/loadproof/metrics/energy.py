"""Energy and cost per token (docs/scenarios.md, "Energy and cost per good token"), from the GPUs' own
energy counters in the run's telemetry and the price the user gave.

NVML's `nvmlDeviceGetTotalEnergyConsumption` is a cumulative counter per GPU (mJ since the driver loaded),
recorded with every telemetry sample (`GPUSample.energy_mj`). Over a window, each GPU's energy is the
counter's growth, its value at each end read by straight-line interpolation between the two samples around
it (a counter grows steadily between samples; a window the samples do not reach on both sides has no
figure). The window is the run's: the first request's send to the last request's end.

- joules = the sum over GPUs; average power = joules / window;
- joules per output token = joules / the output tokens of the successful requests;
- joules per good token = joules / the output tokens of the requests that met every SLO of the run (only
  where it has an SLO: `--slo`);
- cost: with `--price-per-kwh P`, joules / 3.6e6 x P; with `--price-per-gpu-hour P`, the GPUs x the window in
  hours x P; per million (good) tokens: cost / tokens x 1e6, in the price's currency.

The GPUs are every one NVML sees on the machine loadproof runs on, used by the engine or not. Where there is
no counter (no GPU, a GPU older than Volta, sampling off), no figure is made up: one fact,
`energy.unavailable`, says why. Runs recorded before the counter was read (telemetry version 1) have
neither.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadproof.metrics.claims import Claim, fact, number
from loadproof.metrics.slo import meets, slo_values
from loadproof.rundir import TelemetrySample
from loadproof.units import NS_PER_S

if TYPE_CHECKING:
    from loadproof.store.run_dir import Run

J_PER_KWH = 3.6e6
WINDOW = "the first request's send to the last request's end"


@dataclass(frozen=True)
class EnergyWindow:
    """Each GPU's energy over a window (joules, GPU 0 first) and the window's length."""

    joules_by_gpu: tuple[float, ...]
    seconds: float

    @property
    def joules(self) -> float:
        return sum(self.joules_by_gpu)


def energy_window(rows: Sequence[TelemetrySample], start_ns: int, end_ns: int) -> EnergyWindow | None:
    """The counters' growth over [start_ns, end_ns]; None where a GPU's counter is missing or the samples do
    not reach both ends."""
    rows = sorted((r for r in rows if r.gpus), key=lambda r: r.t_ns)
    if not rows or end_ns <= start_ns:
        return None
    indices = sorted({g.index for g in rows[0].gpus or ()})
    joules = []
    for index in indices:
        points = [
            (r.t_ns, g.energy_mj) for r in rows for g in r.gpus or () if g.index == index and g.energy_mj is not None
        ]
        start, end = _at(points, start_ns), _at(points, end_ns)
        if start is None or end is None:
            return None
        joules.append((end - start) / 1000)
    return EnergyWindow(tuple(joules), (end_ns - start_ns) / NS_PER_S) if joules else None


def _at(points: list[tuple[int, int]], t_ns: int) -> float | None:
    """The counter at t_ns, between the samples around it; None outside them."""
    if not points or not points[0][0] <= t_ns <= points[-1][0]:
        return None
    i = bisect_left(points, (t_ns, -1))
    if points[i][0] == t_ns or i == 0:
        return float(points[i][1])
    (t0, e0), (t1, e1) = points[i - 1], points[i]
    return e0 + (e1 - e0) * (t_ns - t0) / (t1 - t0)


def energy_claims(run: Run, plan: Any) -> list[Claim]:
    """`energy.*` and `cost.*` over the run's window; `energy.unavailable` where there is no counter to read."""
    telemetry = run.manifest.telemetry
    note = telemetry.energy_note if telemetry is not None else None
    if note is not None:
        return [fact("energy.unavailable", note, "why this run has no energy figures (telemetry)")]
    if telemetry is None or not any(g.energy_mj is not None for r in run.telemetry for g in r.gpus or ()):
        return []  # recorded before the counter was read
    records = run.records
    if not records:
        return []
    window = energy_window(run.telemetry, min(r.send_ns for r in records), max(r.end_ns for r in records))
    if window is None:
        return [
            fact(
                "energy.unavailable",
                "the telemetry samples do not cover the run's window on every GPU",
                "why this run has no energy figures (telemetry)",
            )
        ]
    claims = [
        number("energy.window_s", window.seconds, "s", WINDOW, 2, direction="neither"),
        number(
            "energy.joules",
            window.joules,
            "J",
            "the GPUs' energy counters' growth over the window, summed "
            "(nvmlDeviceGetTotalEnergyConsumption, interpolated between telemetry samples)",
            1,
            direction="lower",
        ),
        number(
            "energy.avg_power_w", window.joules / window.seconds, "W", "joules / the window", 1, direction="neither"
        ),
    ]
    for index, joules in enumerate(window.joules_by_gpu):
        claims.append(
            number(
                "energy.gpu<gpu>.joules",
                joules,
                "J",
                "this GPU's energy counter's growth over the window",
                1,
                direction="lower",
                parts={"gpu": index},
            )
        )
    output = sum(r.output_tokens or 0 for r in records if r.ok)
    slo = getattr(plan, "slo", None) or {}
    good = sum(r.output_tokens or 0 for r in records if r.ok and meets(slo_values(r), slo)) if slo else None
    if output:
        claims.append(
            number(
                "energy.joules_per_output_token",
                window.joules / output,
                "J/token",
                "joules / output tokens of the successful requests",
                4,
                direction="lower",
            )
        )
    if good:
        claims.append(
            number(
                "energy.joules_per_good_token",
                window.joules / good,
                "J/token",
                "joules / output tokens of the requests that met every SLO",
                4,
                direction="lower",
            )
        )
    return claims + cost_claims(run, window, output, good)


def cost_claims(run: Run, window: EnergyWindow, output: int, good: int | None) -> list[Claim]:
    price = run.manifest.price
    if price is None:
        return []
    if price.per_kwh is not None:
        cost = window.joules / J_PER_KWH * price.per_kwh
        how = f"joules / 3.6e6 x the price per kWh ({price.per_kwh:g})"
    elif price.per_gpu_hour is not None:
        cost = len(window.joules_by_gpu) * window.seconds / 3600 * price.per_gpu_hour
        how = f"GPUs ({len(window.joules_by_gpu)}) x the window in hours x the price per GPU-hour ({price.per_gpu_hour:g})"
    else:
        return []
    claims = [number("cost.total", cost, "price units", how, 6, direction="lower")]
    if output:
        claims.append(
            number(
                "cost.per_million_output_tokens",
                cost / output * 1e6,
                "price units",
                "cost.total / output tokens of the successful requests x 1e6",
                4,
                direction="lower",
            )
        )
    if good:
        claims.append(
            number(
                "cost.per_million_good_tokens",
                cost / good * 1e6,
                "price units",
                "cost.total / output tokens of the requests that met every SLO x 1e6",
                4,
                direction="lower",
            )
        )
    return claims


__all__ = ["EnergyWindow", "energy_claims", "energy_window"]
