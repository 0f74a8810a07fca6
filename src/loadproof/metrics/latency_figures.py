"""Latency distributions as report panels (`metrics.figures`): for TTFT, ITL and E2E latency, the empirical
CDF with its p50 and p99 marked, and a histogram.

The values are `metrics.latency.samples_ns`'s, the very samples the `<prefix>.<latency>.<stat>` claims
summarize, and the marked percentiles are computed the same way (`metrics.distribution.percentile`), so a
mark sits where the claim says; each mark's 95% interval is the claim's too (`metrics.uncertainty.stat_interval`
over the same values), drawn as a whisker across it (on the CDF at the percentile's height), and a percentile
of too few values for one says so in its label. Presentation only: no claim reads this module. Standard library
only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from loadproof.metrics.distribution import percentile
from loadproof.metrics.figures import MAX_POINTS, TTFT_CDF, Histogram, LinePlot, Mark, Panel, Point, Series
from loadproof.metrics.interval_text import TOO_FEW
from loadproof.metrics.latency import samples_ns
from loadproof.metrics.uncertainty import ranked, stat_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

# (samples_ns key, short name, what it is, the report key's stem)
DISTRIBUTIONS = (
    ("ttft_s", "TTFT", "t_first_token - t_send of each successful request", "ttft"),
    ("itl_s", "ITL", "each gap between successive token-bearing chunks of a successful request", "itl"),
    ("e2el_s", "E2E latency", "t_last_token - t_send of each successful request", "e2el"),
)
MAX_BINS = 40
TAIL_PERCENTILE = 99.5  # a histogram's range ends here when the values beyond stretch it more than TAIL_STRETCH
TAIL_STRETCH = 1.5


def cdf_points(ordered: Sequence[float], limit: int = MAX_POINTS) -> list[Point]:
    """The empirical CDF of sorted values as step corners (value, fraction at or below); more values than
    `limit`: the value at each of `limit` evenly spaced fractions, and the largest."""
    n = len(ordered)
    if n <= limit:
        return [(ordered[0], 0.0)] + [(v, (i + 1) / n) for i, v in enumerate(ordered)]
    ranks = sorted({max(0, math.ceil(n * k / limit) - 1) for k in range(1, limit + 1)} | {n - 1})
    return [(ordered[0], 0.0)] + [(ordered[i], (i + 1) / n) for i in ranks]


def histogram_bins(ordered: Sequence[float]) -> tuple[list[float], list[int], int]:
    """(edges, counts, values beyond the last edge): equal bins from the smallest value to the largest, or to
    the 99.5th percentile where the tail beyond would stretch the range by more than half (those values are
    counted apart, not drawn)."""
    low, high = ordered[0], ordered[-1]
    tail = percentile(ordered, TAIL_PERCENTILE)
    if high - low > TAIL_STRETCH * (tail - low) and tail > low:
        high = tail
    count = max(1, min(MAX_BINS, round(math.sqrt(len(ordered)))))
    if high <= low:
        return [low, low + max(abs(low) * 0.01, 1e-9)], [len(ordered)], 0
    width = (high - low) / count
    counts = [0] * count
    beyond = 0
    for v in ordered:
        if v > high:
            beyond += 1
        else:
            counts[min(int((v - low) / width), count - 1)] += 1
    return [low + i * width for i in range(count + 1)], counts, beyond


def distribution_panels(records: Sequence[RequestRecord], claim_prefix: str = "load") -> list[Panel]:
    """CDF and histogram of TTFT, ITL and E2E latency (each with at least two values), side by side."""
    values = samples_ns(list(records))
    out: list[Panel] = []
    for key, name, what, stem in DISTRIBUTIONS:
        if len(values[key]) < 2:
            continue
        seconds = sorted(v / NS_PER_S for v in values[key])
        factor, unit = (1000.0, "ms") if seconds[-1] < 1.0 else (1.0, "s")
        ordered = [v * factor for v in seconds]
        marks = percentile_marks(values[key], ordered, factor, unit)
        label = f"{name}, {unit}"
        claims = f"{claim_prefix}.{key}.p50 and .p99"
        out.append(
            LinePlot(
                title=f"{name} distribution ({len(ordered):,} {'gaps' if key == 'itl_s' else 'requests'})",
                key=TTFT_CDF if key == "ttft_s" else f"{stem}-cdf",
                series=[Series(name, cdf_points(ordered))],
                x_label=label,
                y_label="fraction at or below",
                marks=marks,
                step=True,
                x_from_zero=True,
                half=True,
                caption=f"Empirical CDF of {what}; p50 and p99 marked ({claims}), each with its 95% interval "
                "as a whisker where there are values enough for one.",
            )
        )
        edges, counts, beyond = histogram_bins(ordered)
        out.append(
            Histogram(
                title=f"{name} histogram",
                key=f"{stem}-histogram",
                edges=edges,
                counts=counts,
                x_label=label,
                y_label="gaps" if key == "itl_s" else "requests",
                marks=[msgspec.structs.replace(m, at=None) for m in marks],
                half=True,
                caption=f"{len(counts)} equal bins from the smallest value"
                + (
                    f" to the {TAIL_PERCENTILE:g}th percentile; {beyond:,} larger values (up to {ordered[-1]:.3g} "
                    f"{unit}) are beyond the last bin."
                    if beyond
                    else " to the largest."
                ),
            )
        )
    return out


def percentile_marks(values_ns: Sequence[float], ordered: Sequence[float], factor: float, unit: str) -> list[Mark]:
    """The p50 and p99 of the sorted values (in the plot's unit, `factor` per second), each with its 95%
    interval from the values in ns as the claim has it, at the percentile's height on a CDF; a percentile
    without one says why in its label."""
    ranks = ranked(values_ns)
    marks = []
    for stat, p in (("p50", 50.0), ("p99", 99.0)):
        x = percentile(ordered, p)
        interval = stat_interval(values_ns, stat, factor / NS_PER_S, ranks)
        label = f"{stat} {x:.3g} {unit}"
        if interval is None:
            marks.append(Mark(x, f"{label} ({TOO_FEW})"))
        else:
            marks.append(Mark(x, label, interval.low, interval.high, p / 100))
    return marks


# (samples_ns key, the plot's title, its key): what `loadproof compare` overlays, side against side
OVERLAID = (
    ("ttft_s", "TTFT", "ttft-by-side"),
    ("itl_s", "ITL", "itl-by-side"),
    ("tpot_s", "TPOT", "tpot-by-side"),
    ("e2el_s", "E2E latency", "e2el-by-side"),
)


def overlaid_panels(sides: Sequence[tuple[str, Sequence[RequestRecord]]]) -> list[Panel]:
    """Each latency's empirical CDF, one line per side (label, every record of its runs), on one plot: where
    two sides' whole distributions part, not only their medians. A latency no side has two values of is
    left out; one side alone is drawn beside the others' where it has values."""
    values = [(label, samples_ns(list(records))) for label, records in sides]
    out: list[Panel] = []
    for key, name, plot_key in OVERLAID:
        shown = [(label, sorted(v / NS_PER_S for v in found[key])) for label, found in values if len(found[key]) >= 2]
        if len(shown) < 2:
            continue
        factor, unit = (1000.0, "ms") if max(v[-1] for _, v in shown) < 1.0 else (1.0, "s")
        series = [Series(f"{label} (n={len(v):,})", cdf_points([x * factor for x in v])) for label, v in shown]
        out.append(
            LinePlot(
                title=f"{name}, side by side",
                key=plot_key,
                series=series,
                x_label=f"{name}, {unit}",
                y_label="fraction at or below",
                step=True,
                x_from_zero=True,
                half=True,
                caption=f"Empirical CDF of every {name} sample of each side's runs (repeats together), the "
                "definitions the claims use: the whole distributions, one over the other.",
            )
        )
    return out
