"""A prediction with the range its assumptions leave open (docs/simulator.md, "Ranges").

`predict_ranges` predicts a scenario's figures on the profile as it is (the point), then under every other
value of each open assumption (`sim.assumptions`), one assumption at a time, the others at their point;
then, for each figure, under the two corners: every open assumption at the value that gave the figure its
lowest (highest) value alone. A figure's range is the lowest and highest of all these predictions; the
assumption that drives it is the one whose own values spread the figure the most. A pinned assumption
(one value) does not widen anything, and the report says what pinned it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadproof.sim.assumptions import Assumption, with_overrides

Figures = dict[str, float | None]


@dataclass(frozen=True)
class FigureRange:
    claim: str
    point: float
    low: float
    high: float
    driver: str | None  # the assumption whose values spread it most; None: nothing open moves it
    spreads: dict[str, tuple[float, float]]  # each open assumption's (lowest, highest) alone

    @property
    def width_pct(self) -> float:
        return 100 * (self.high - self.low) / abs(self.point) if self.point else 0.0


@dataclass(frozen=True)
class RangedPrediction:
    figures: tuple[FigureRange, ...]
    assumptions: tuple[Assumption, ...]  # every assumption of the profile, open and pinned
    predictions: int  # how many predictions the range took


def predict_ranges(
    config: Any, predict: Callable[[Any], Figures], say: Callable[[str], None] = lambda _: None
) -> RangedPrediction:
    """`predict(config) -> {claim: value}` at the point, under each open assumption's values, and at each
    figure's corners (see the module doc)."""
    point = predict(config)
    points = {k: v for k, v in point.items() if v is not None}
    names = list(points)
    opened = [a for a in config.assumptions if a.open]
    alone: dict[str, list[tuple[dict[str, Any], Figures]]] = {}
    total = sum(len(a.variants) - 1 for a in opened)
    done = 0
    for a in opened:
        runs: list[tuple[dict[str, Any], Figures]] = [({}, point)]
        for variant in a.variants:
            if variant.value == a.point:
                continue
            done += 1
            say(f"prediction {done}/{total}: {a.name} = {variant.value}")
            runs.append((variant.overrides, predict(with_overrides(config, variant.overrides))))
        alone[a.name] = runs
    every = [point] + [figs for runs in alone.values() for _, figs in runs[1:]]
    corners: dict[tuple[str, str], Figures] = {}
    for name in names:
        for side, pick in (("low", min), ("high", max)):
            merged: dict[str, Any] = {}
            for a in opened:
                overrides, _ = pick(alone[a.name], key=lambda run: _value(run[1], name, pick is max))
                merged.update(overrides)
            key = repr(sorted(merged.items()))
            if merged and key not in {k for k, _ in corners}:
                say(f"prediction: the {side} corner of {name}")
                corners[(key, name)] = predict(with_overrides(config, merged))
    every += list(corners.values())
    figures = []
    for name in names:
        values = [v for figs in every if (v := figs.get(name)) is not None]
        spreads = {
            a: (min(vs), max(vs))
            for a, runs in alone.items()
            if (vs := [v for _, figs in runs if (v := figs.get(name)) is not None])
        }
        widest = max(spreads, key=lambda a: spreads[a][1] - spreads[a][0], default=None)
        if widest is not None and spreads[widest][1] == spreads[widest][0]:
            widest = None
        figures.append(FigureRange(name, float(points[name]), min(values), max(values), widest, spreads))
    return RangedPrediction(tuple(figures), tuple(config.assumptions), 1 + done + len(corners))


def _value(figures: Figures, name: str, high: bool) -> float:
    value = figures.get(name)
    if value is None:
        return float("-inf") if high else float("inf")
    return value
