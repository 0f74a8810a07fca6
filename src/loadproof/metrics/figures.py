"""A scenario's report panels as typed data: tables (report.md, the console), plots and headline figures
(report.html).

A scenario's catalog entry may name `figures(run, plan, claims) -> list[Panel]` in its metrics module;
`panels_of` calls it, and report/ renders every panel the same way (report.plots draws the plots), so
nothing generic knows which scenario made a panel. Pure data, numbers and words: no SVG, no markup.

Every plot carries a `key`, a stable name report.html gives its figure (`id="fig-KEY"`, `data-plot`), so a
test or a reader can find a plot whatever its title says; `half` plots sit two to a row on a wide page. A
`Headline` is the few figures report.html shows above the plots, each the printed value of one claim:
presentation only, nothing in it is computed anew.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from loadproof.catalog import column
from loadproof.metrics.claims import Claim
from loadproof.metrics.interval_text import interval_notes
from loadproof.plans import Plan, load_plan, scenario_of
from loadproof.records import RequestRecord
from loadproof.registry import Registry
from loadproof.store.run_dir import Run

Point = tuple[float, float]
MAX_POINTS = 300  # per line; a longer series is thinned (every k-th point and the last)


class Table(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """A section of report.md: `## title`, the intro lines, the table."""

    title: str
    header: list[str]
    rows: list[list[str]]
    intro: list[str] = []
    console: str | None = None  # its title on the console; None: report.md only
    claims: list[str] = []  # the claims it shows: the console's list of figures leaves them out


class Series(msgspec.Struct, frozen=True):
    name: str
    points: list[Point]
    line: bool = True  # False: points alone, no line through them (many: small and pale; a few: markers)
    color: str = ""  # its colour ("": the palette's, by its place)


class Span(msgspec.Struct, frozen=True):
    """A shaded stretch of the x axis, labelled."""

    start: float
    end: float
    label: str
    color: str


class Mark(msgspec.Struct, frozen=True):
    """A labelled vertical line. Where it marks a figure that has an interval (a percentile on a CDF), the
    interval [low, high] is drawn across it as a whisker, at the height `at` (in the y axis's units; None:
    just under the labels)."""

    x: float
    label: str
    low: float | None = None
    high: float | None = None
    at: float | None = None


class Level(msgspec.Struct, frozen=True):
    """A labelled horizontal line: a target or a bound the lines are read against."""

    y: float
    label: str


class ErrorBar(msgspec.Struct, frozen=True):
    """A figure's interval on the y axis, [low, high] at x: a whisker (a level's pooled attainment at its rate)."""

    x: float
    low: float
    high: float


class LinePlot(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Lines (or steps) of (x, y) points; see `report.plots.line_chart` for the drawing options."""

    title: str
    series: list[Series]
    x_label: str
    y_label: str
    caption: str
    spans: list[Span] = []
    marks: list[Mark] = []
    levels: list[Level] = []
    error_bars: list[ErrorBar] = []
    step: bool = False
    y_from_zero: bool = True
    x_from_zero: bool = False
    dots: bool = False
    x_whole: bool = False  # x counts things (turns, streams, rounds): ticks at whole numbers only
    key: str = ""  # report.html's stable name of the figure ("": made from the title)
    half: bool = False  # half the page's width: two such plots to a row


class Bars(msgspec.Struct, frozen=True):
    name: str
    values: list[float | None]  # one per group; None: no bar


class BarPlot(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Grouped bars: one group per entry of `groups`, one bar per series."""

    title: str
    groups: list[str]
    series: list[Bars]
    y_label: str
    x_label: str = ""
    caption: str
    key: str = ""
    half: bool = False


class Histogram(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Counts of values in bins: `edges` has one more entry than `counts` (bin i is [edges[i], edges[i+1]))."""

    title: str
    edges: list[float]
    counts: list[int]
    x_label: str
    y_label: str = "requests"
    caption: str
    marks: list[Mark] = []
    key: str = ""
    half: bool = False


class KeyFigure(msgspec.Struct, frozen=True):
    """One headline figure: a claim's printed value, its unit, the claim it is (its name), and its 95% interval
    as `metrics.interval_text` writes it (`[0.1520, 0.2120]`, or that n was too small for one; "": none)."""

    label: str
    printed: str
    unit: str = ""
    claim: str = ""
    interval: str = ""


class Headline(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """The run's few key figures, shown in report.html above its plots (the first one stands for the run in
    a folder's index.html); `note`, a line beside them (what the figures are read against)."""

    figures: list[KeyFigure]
    note: str = ""


Panel = Table | LinePlot | BarPlot | Histogram | Headline
Plot = LinePlot | BarPlot | Histogram
TTFT_CDF = "ttft-cdf"  # the key of a TTFT distribution: report.html adds its own only to a run without one
FigureFunction = Callable[[Run, Plan, list[Claim]], list[Panel]]

figure_functions: Registry[FigureFunction] = Registry.over("scenario", column("figures"))


def panels_of(run: Run, claims: list[Claim]) -> list[Panel]:
    """The report panels of the run's scenario (none where its catalog entry names no `figures`)."""
    scenario = scenario_of(run)
    if scenario not in figure_functions:
        return []
    return figure_functions.get(scenario)(run, load_plan(run), claims)


def tables_of(panels: list[Panel]) -> list[Table]:
    return [p for p in panels if isinstance(p, Table)]


def headline_of(panels: Sequence[Panel]) -> Headline | None:
    """The first Headline among the panels (None: the scenario gives none)."""
    return next((p for p in panels if isinstance(p, Headline)), None)


def headline(claims: Sequence[Claim], shown: Sequence[tuple[str, str]], note: str = "") -> list[Panel]:
    """A Headline of the claims named in `shown` ((label, claim name), in order), those the run has; [] when
    it has none of them."""
    by_name = {c.name: c for c in claims}
    notes = interval_notes(claims)
    figures = [
        KeyFigure(label, by_name[name].printed, by_name[name].unit, name, notes.get(name, ""))
        for label, name in shown
        if name in by_name
    ]
    return [Headline(figures=figures, note=note)] if figures else []


def planned_records(records: list[RequestRecord], request_ids: list[str]) -> list[RequestRecord]:
    """The records of the planned request ids, in the plan's order (ids without a record left out)."""
    by_id = {r.request_id: r for r in records}
    return [by_id[i] for i in request_ids if i in by_id]


def thin(points: list[Point]) -> list[Point]:
    """At most about MAX_POINTS of `points`: every k-th, and the last."""
    if len(points) <= MAX_POINTS:
        return points
    k = -(-len(points) // MAX_POINTS)
    return points[::k] + ([points[-1]] if (len(points) - 1) % k else [])
