"""A rate search decided on intervals draws each level's pooled attainment interval as a whisker at its rate on
its attainment plot (the interval its decision rests on), the bounds worked out here with Wilson's interval over
the level's pooled requests; a search decided on the point value draws none."""

from __future__ import annotations

import re

import pytest

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.figures import LinePlot
from loadproof.metrics.intervals import wilson_interval
from loadproof.metrics.load_series import judge_trials
from loadproof.metrics.series_figures import search_panels
from loadproof.report.html import plot_figure


def trial(rate: float, good: int, requests: int) -> tuple[float, list[Claim]]:
    return rate, [
        fact("load.slo", "ttft <= 1 s", ""),
        count("load.requests", requests, "requests", "", direction="neither"),
        count("load.good_requests", good, "requests", "", direction="higher"),
        number("load.slo_attainment_pct", 100 * good / requests, "%", "", 2, direction="higher"),
        fact("load.client_limited", False, ""),
    ]


# rate 1 passes at once; rate 2 straddles, then passes pooled (59 of 60); rate 3 fails
SEARCH = [trial(1.0, 60, 60), trial(2.0, 29, 30), trial(2.0, 30, 30), trial(3.0, 20, 30)]
POOLED = {1.0: (60, 60), 2.0: (59, 60), 3.0: (20, 30)}


def attainment_plot(rule: str) -> LinePlot:
    rows, claims = judge_trials(SEARCH, 0.9, rule=rule)
    (plot,) = [
        p for p in search_panels(rows, claims, 0.9, {}) if isinstance(p, LinePlot) and p.key == "attainment-vs-rate"
    ]
    return plot


def test_each_level_gets_its_pooled_interval_as_a_whisker():
    plot = attainment_plot("interval")
    expected = []
    for rate, (good, n) in POOLED.items():
        interval = wilson_interval(good, n)
        expected.append((rate, 100 * interval.low, 100 * interval.high))
    assert [(b.x, b.low, b.high) for b in plot.error_bars] == [pytest.approx(e) for e in expected]
    drawn = plot_figure(plot)
    assert drawn is not None
    titles = re.findall(r'<g class="whisker"[^>]*><title>95% interval \[([^\]]+)\]', drawn.svg)
    assert titles == [f"{low:.4g}, {high:.4g}" for _, low, high in expected]


def test_a_search_on_the_point_value_draws_no_whisker():
    plot = attainment_plot("point")
    assert plot.error_bars == []
    drawn = plot_figure(plot)
    assert drawn is not None and 'class="whisker"' not in drawn.svg
