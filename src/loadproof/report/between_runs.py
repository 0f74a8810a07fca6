"""The tables of between-run variation: runs of one scenario, as one side (`--repeats N`: each key figure's
runs, mean, 95% interval, spread), or as two arms run interleaved (`run ab --scenario`: each arm's mean and
interval, B - A with its interval, "not distinguishable" when that contains 0).

A side is `report.compare`'s (`build_side`: every run's claims, one sample per run); the statistics are
`metrics.between_runs`'. Which figures: the scenario's headline (`metrics.headline`, its catalog entry's) that
every side holds and that has a better direction, in the headline's order; every such figure with `every`.
Pure: returns rows and lines; `scenarios.repeats` writes them, `scripts/gpu/abba_table.py` prints them for run
directories made by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loadproof.metrics.between_runs import ArmDifference, Spread, arm_difference, spread
from loadproof.metrics.claims import Claim
from loadproof.metrics.headline import matcher
from loadproof.metrics.intervals import Interval
from loadproof.metrics.latency import client_side
from loadproof.report.change import figure_text, percent
from loadproof.report.compare import Side, build_side
from loadproof.report.headline import console_headline
from loadproof.store.run_dir import Run

NOT_DISTINGUISHABLE = "not distinguishable"


def sides_of(runs: Sequence[tuple[str, Run]], claims_of: Callable[[Run], list[Claim]]) -> list[Side]:
    """One side per label, in the order the labels first appear, each its runs in run order."""
    labels = list(dict.fromkeys(label for label, _ in runs))
    return [build_side(label, [run for lab, run in runs if lab == label], claims_of) for label in labels]


def figure_names(sides: Sequence[Side], every: bool = False) -> list[str]:
    """The figures the tables show: numbers every side holds, with a better direction, never the client's own
    diagnostics; the scenario's headline ones in its order (every such figure with `every`, the headline's
    first)."""
    first = sides[0]
    names = [
        n
        for n in first.samples
        if all(side.samples.get(n) for side in sides) and first.meaning[n].direction != "neither" and not client_side(n)
    ]
    ordered: list[str] = []
    for spec in console_headline(first.scenario) or ():
        for figure in spec.figures:
            match = matcher(figure.claim)
            ordered += [n for n in names if match(n) is not None and n not in ordered]
    if every or not ordered:
        ordered += [n for n in names if n not in ordered]
    return ordered


def _text(value: float, side: Side, name: str, sign: bool = False) -> str:
    """As the claim prints; a value that rounds to zero there is `0.000`, never `-0.000` or `+0.000`."""
    text = figure_text(value, side.printed.get(name))
    if float(text) == 0:
        return text.lstrip("-")
    return f"+{text}" if sign and value > 0 else text


def _interval(interval: Interval | None, side: Side, name: str, sign: bool = False) -> str:
    if interval is None:
        return "n/a"
    return f"[{_text(interval.low, side, name, sign)}, {_text(interval.high, side, name, sign)}]"


def _mean(s: Spread, side: Side, name: str) -> str:
    return f"{_text(s.mean, side, name)} {_interval(s.interval, side, name)}"


def _each(s: Spread, side: Side, name: str) -> str:
    return ", ".join(_text(v, side, name) for v in s.values)


def verdict(diff: ArmDifference, direction: str, label_b: str) -> str:
    """`not distinguishable`, or which way B differs and whether that is better (by the claim's direction)."""
    if diff.distinguishable is None:
        return "n/a (one run on a side)"
    if not diff.distinguishable:
        return NOT_DISTINGUISHABLE
    higher = diff.difference > 0
    text = f"{label_b} {'higher' if higher else 'lower'}"
    return text if direction == "neither" else f"{text}, {'better' if higher == (direction == 'higher') else 'worse'}"


def arms_table(a: Side, b: Side, names: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """claim, each arm's runs, each arm's mean [95%], B - A [95%], (B - A) / A, and the verdict."""
    la, lb = a.label, b.label
    header = [
        "claim",
        f"{la} (each run)",
        f"{lb} (each run)",
        f"{la} mean [95%]",
        f"{lb} mean [95%]",
        f"{lb} - {la} [95%]",
        "change",
        f"{lb} vs {la}",
    ]
    rows = []
    for name in names:
        diff = arm_difference(a.samples[name], b.samples[name])
        rows.append(
            [
                name,
                _each(diff.a, a, name),
                _each(diff.b, b, name),
                _mean(diff.a, a, name),
                _mean(diff.b, b, name),
                f"{_text(diff.difference, a, name, sign=True)} {_interval(diff.interval, a, name, sign=True)}",
                percent(diff.change) if diff.change is not None else "n/a",
                verdict(diff, a.meaning[name].direction, lb),
            ]
        )
    return header, rows


def spread_table(side: Side, names: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """claim, each run's value, the mean [95%], the runs' standard deviation and coefficient of variation."""
    header = ["claim", "each run", "mean [95%]", "sd", "cv"]
    rows = []
    for name in names:
        s = spread(side.samples[name])
        rows.append(
            [
                name,
                _each(s, side, name),
                _mean(s, side, name),
                _text(s.sd, side, name) if s.sd is not None else "n/a",
                f"{s.cv:.1%}" if s.cv is not None else "n/a",
            ]
        )
    return header, rows


def console_columns(header: Sequence[str], rows: Sequence[Sequence[str]]) -> tuple[list[str], list[list[str]]]:
    """The table without its each-run columns (report.md keeps them): what fits a terminal."""
    keep = [i for i, title in enumerate(header) if "each run" not in title]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], code: bool = True) -> list[str]:
    """A Markdown table; with `code`, each row's first cell (a claim's name) as code."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join([f"`{row[0]}`" if code else row[0], *row[1:]]) + " |" for row in rows]


__all__ = [
    "NOT_DISTINGUISHABLE",
    "arms_table",
    "console_columns",
    "figure_names",
    "markdown_table",
    "sides_of",
    "spread_table",
    "verdict",
]
