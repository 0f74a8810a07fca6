"""A load sweep's and a rate search's curves as report panels (`metrics.figures`), from their points' and
trials' figures (`rundir.series.PointFigures`: each its run's claims, recomputed) and the search's claims.

- a rate search: SLO attainment against the rate tried, the target as a line, the rate found marked (or,
  where the search gives only a lower bound, the bound, labelled as one, with why: interrupted, or every
  rate passed); TTFT p50 and p99 against the rate, the SLO's TTFT bound as a line; goodput and completed
  requests against the rate;
- a sweep: latency (TTFT p50, p99, ITL p99), end-to-end latency and goodput against the rate.

Each point sits at its rate: the rate asked (a trial's plan rate_rps, a sweep point's), or for the
synchronous and throughput points of `--sweep auto`, which ask none, the request rate they achieved. Presentation
only: the search's claims are `metrics.load_series`'s. Standard library and msgspec only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadproof.metrics.claims import Claim
from loadproof.metrics.figures import ErrorBar, Level, LinePlot, Mark, Panel, Point, Series, headline
from loadproof.rundir.series import SearchTrial, SweepPoint

RATE = "requests/s"
PASSED, FAILED, LINE, UNDECIDED = "#1d7a3a", "#b3261e", "#9aa4ae", "#b26a00"
SEARCH_HEADLINE = (
    ("highest rate meeting the SLO", "load.search.max_rate_rps"),
    ("at least (a lower bound)", "load.search.rate_lower_bound_rps"),
    ("SLO attainment there", "load.search.attainment_pct"),
    ("lowest rate above it not passing", "load.search.min_failing_rate_rps"),
    ("attainment target", "load.search.attainment_target_pct"),
    ("trials", "load.search.trials"),
    ("extra requests at straddling rates", "load.search.extra_requests"),
)


def point_x(point: SweepPoint | SearchTrial) -> float | None:
    """Where a point sits on the rate axis: its rate asked, else the request rate it achieved."""
    if point.rate_rps is not None:
        return point.rate_rps
    value = point.request_throughput_rps
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def curve(points: Sequence[SweepPoint | SearchTrial], key: str, scale: float = 1.0) -> list[Point]:
    """(rate, figure `key` x scale) of every point that has both, by rate."""
    pts = [(point_x(p), p.figure(key)) for p in points]
    return sorted(
        (x, float(y) * scale)
        for x, y in pts
        if x is not None and isinstance(y, (int, float)) and not isinstance(y, bool)
    )


def level_intervals(trials: Sequence[SearchTrial]) -> list[ErrorBar]:
    """A search decided on intervals: each level's pooled attainment interval at its rate, as its last segment
    has it (the one its decision rests on)."""
    last: dict[float, SearchTrial] = {}
    for trial in trials:
        x = point_x(trial)
        if x is not None and (x not in last or trial.segment >= last[x].segment):
            last[x] = trial
    return [
        ErrorBar(x, t.level_attainment_low_pct, t.level_attainment_high_pct)
        for x, t in sorted(last.items())
        if t.level_attainment_low_pct is not None and t.level_attainment_high_pct is not None
    ]


def search_panels(
    trials: Sequence[SearchTrial], claims: Sequence[Claim], attainment: float, slo: Mapping[str, float]
) -> list[Panel]:
    """The search's headline (with its result line) and its curves (module doc)."""
    by_name = {c.name: c for c in claims}
    found, bound = by_name.get("load.search.max_rate_rps"), by_name.get("load.search.rate_lower_bound_rps")
    failing = by_name.get("load.search.min_failing_rate_rps")
    interrupted = "load.search.interrupted" in by_name
    marks = []
    if found is not None:
        marks.append(Mark(float(found.value), f"highest passing: {float(found.value):g} {RATE}"))
    elif bound is not None:
        why = "search interrupted" if interrupted else "every rate tried passed"
        marks.append(Mark(float(bound.value), f"lower bound: at least {float(bound.value):g} {RATE} ({why})"))
    if failing is not None:
        marks.append(Mark(float(failing.value), f"fails: {float(failing.value):g}"))
    passed = [t for t in trials if t.passed]
    failed = [t for t in trials if not t.passed and t.decision in (None, "fail")]
    straddled = [t for t in trials if t.decision == "undecided"]  # on intervals: ran again, or left undecided
    attained = [
        Series(name, curve(group, "slo_attainment_pct"), line=False, color=colour)
        for name, group, colour in (
            ("trial passed", passed, PASSED),
            ("trial failed", failed, FAILED),
            ("interval straddled the target", straddled, UNDECIDED),
        )
        if group
    ]
    panels: list[Panel] = []
    every = curve(trials, "slo_attainment_pct")
    if every:
        panels.append(
            LinePlot(
                title="SLO attainment against the rate tried",
                key="attainment-vs-rate",
                series=[Series("every trial", every, color=LINE), *attained],
                x_label=f"rate asked, {RATE}",
                y_label="requests meeting the SLO, %",
                levels=[Level(attainment * 100, f"target {attainment * 100:g}%")],
                error_bars=level_intervals(trials),
                marks=marks,
                x_from_zero=True,
                caption="Each trial (a run at a constant rate) at its rate: the share of its requests that met every "
                "SLO (load.slo_attainment_pct). "
                + (
                    "A rate passes when its requests, pooled over its trials, give an attainment whose 95% interval "
                    "(the whisker at its rate) lies at or above the target; one whose interval straddled it ran "
                    "again, up to the budget."
                    if any(t.decision is not None for t in trials)
                    else "A trial passes at or above the target when the client kept its schedule."
                ),
            )
        )
    latency = [
        (name, curve(trials, key, 1000.0)) for name, key in (("TTFT p50", "ttft_p50_s"), ("TTFT p99", "ttft_p99_s"))
    ]
    latency = [(n, c) for n, c in latency if c]
    if latency:
        ttft_bound = slo.get("ttft")
        panels.append(
            LinePlot(
                title="TTFT against the rate tried",
                key="ttft-vs-rate",
                series=[Series(n, c) for n, c in latency],
                x_label=f"rate asked, {RATE}",
                y_label="time to first token, ms",
                levels=[Level(ttft_bound * 1000, f"SLO: ttft <= {ttft_bound * 1000:g} ms")] if ttft_bound else [],
                marks=marks,
                dots=True,
                x_from_zero=True,
                half=True,
                caption="Each trial's TTFT median and 99th percentile (load.ttft_s.p50, .p99) at its rate.",
            )
        )
    rates = [
        Series(name, curve(trials, key))
        for name, key in (("goodput (met every SLO)", "goodput_rps"), ("completed", "request_throughput_rps"))
    ]
    rates = [s for s in rates if s.points]
    if rates:
        panels.append(
            LinePlot(
                title="Goodput and completed requests against the rate tried",
                key="goodput-vs-rate",
                series=rates,
                x_label=f"rate asked, {RATE}",
                y_label=RATE,
                marks=marks,
                dots=True,
                x_from_zero=True,
                half=True,
                caption="Each trial's requests that met every SLO per second (load.goodput_rps), and its "
                "successful requests per second (load.request_throughput_rps).",
            )
        )
    result = next((c for c in claims if c.name == "load.search.slo"), None)
    note = f"SLO: {result.printed}" if result is not None else ""
    return headline(claims, SEARCH_HEADLINE, note) + panels


def sweep_panels(points: Sequence[SweepPoint]) -> list[Panel]:
    """The sweep's curves (a curve with fewer than two points is left out); keys name the files report.md
    links (latency.svg, e2el.svg, goodput.svg, attainment.svg)."""
    panels: list[Panel] = []
    latency = [
        Series(name, curve(points, key))
        for name, key in (("TTFT p50", "ttft_p50_s"), ("TTFT p99", "ttft_p99_s"), ("ITL p99", "itl_p99_s"))
    ]
    latency = [s for s in latency if len(s.points) >= 2]
    if latency:
        panels.append(
            LinePlot(
                title="Latency vs rate: TTFT p50, TTFT p99, ITL p99",
                key="latency",
                series=latency,
                x_label=RATE,
                y_label="seconds",
                dots=True,
                x_from_zero=True,
                caption="latency vs rate",
            )
        )
    e2el = curve(points, "e2el_p50_s")
    if len(e2el) >= 2:
        panels.append(
            LinePlot(
                title="Latency vs rate: E2EL p50",
                key="e2el",
                series=[Series("E2EL p50", e2el)],
                x_label=RATE,
                y_label="seconds",
                dots=True,
                x_from_zero=True,
                half=True,
                caption="end-to-end latency vs rate",
            )
        )
    rates = [
        Series(name, curve(points, key))
        for name, key in (("goodput (met every SLO)", "goodput_rps"), ("completed", "request_throughput_rps"))
    ]
    rates = [s for s in rates if len(s.points) >= 2]
    if rates:
        panels.append(
            LinePlot(
                title="Goodput vs rate",
                key="goodput",
                series=rates,
                x_label=f"{RATE} asked",
                y_label=RATE,
                dots=True,
                x_from_zero=True,
                half=True,
                caption="goodput vs rate",
            )
        )
    attained = curve(points, "slo_attainment_pct")
    if len(attained) >= 2:
        panels.append(
            LinePlot(
                title="SLO attainment vs rate",
                key="attainment",
                series=[Series("SLO met", attained)],
                x_label=RATE,
                y_label="requests meeting the SLO, %",
                dots=True,
                x_from_zero=True,
                half=True,
                caption="SLO attainment vs rate",
            )
        )
    return panels


def search_outcome(claims: Sequence[Claim]) -> str:
    """The search's outcome in a word or two: FOUND (a rate with a failing one above it), LOWER BOUND (the
    rate meeting the SLO is at least the one given), NONE PASSED."""
    names = {c.name for c in claims}
    if "load.search.max_rate_rps" in names:
        return "FOUND"
    return "LOWER BOUND" if "load.search.rate_lower_bound_rps" in names else "NONE PASSED"
