"""The summaries of a series of runs, each a folder of ordinary run directories with one summary file:
`run load --search rate` (search.json, `RateSearch`), `run load --sweep` (sweep.json, `Sweep`) and `run
capacity --search` (search.json, `CapacitySearch`). Each file records its schema version in `schema`; a
file without one is version 1, the shape written before versions were recorded. `store.series` reads each
version through `store.schema.READERS` and writes the current one.

A load point's or trial's figures are its run's claims (`metrics.load_series.POINT_FIGURES`): the value
and, with `_printed`, the printed figure ("n/a" where the run has no such claim), flat beside the point's own
fields, as every file has written them.

Versions:
- load search.json 1: no `schema`; `interrupted` only when it was, `lower_bound` and `result` absent in
  searches written before a bound was told from a result (the reader fills them: not interrupted, a bound
  where no trial above the best failed or the search was interrupted, no result line); 2: every field; 3
  adds `decision` (the rule: `interval` or `point`; a version 1 or 2 search was decided on the point value),
  `segments` (the budget of segments a level) and each trial's level, segment and pooled decision (#41).
- capacity search.json 1: no `schema`, no `lower_bound`, `interrupted` or `result` (filled the same way); 2.
- sweep.json 1: `interrupted` and `auto_rates_rps` only when they apply (read as absent: not interrupted,
  no automatic rates); written with `schema` 1 since.

Standard library and msgspec only: `verify` reaches here.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from loadproof.rundir.json_value import JSONObject

Figure = float | int | bool | str | None  # a claim's value (a count, a figure, a yes/no fact), None: no claim
RATE_SEARCH_KIND = "load-rate-search"  # a load search.json's `kind`
SWEEP_KIND = "load-sweep"  # sweep.json's


class PointFigures(msgspec.Struct, kw_only=True):
    """A load run's figures as a sweep point or a search trial keeps them (`metrics.load_series.point_figures`)."""

    requests: Figure = None
    requests_printed: str = "n/a"
    good_requests: Figure = None
    good_requests_printed: str = "n/a"
    failed: Figure = None
    failed_printed: str = "n/a"
    achieved_rate_rps: Figure = None
    achieved_rate_rps_printed: str = "n/a"
    request_throughput_rps: Figure = None
    request_throughput_rps_printed: str = "n/a"
    output_tokens_per_s: Figure = None
    output_tokens_per_s_printed: str = "n/a"
    ttft_p50_s: Figure = None
    ttft_p50_s_printed: str = "n/a"
    ttft_p99_s: Figure = None
    ttft_p99_s_printed: str = "n/a"
    itl_p99_s: Figure = None
    itl_p99_s_printed: str = "n/a"
    e2el_p50_s: Figure = None
    e2el_p50_s_printed: str = "n/a"
    goodput_rps: Figure = None
    goodput_rps_printed: str = "n/a"
    slo_attainment_pct: Figure = None
    slo_attainment_pct_printed: str = "n/a"
    send_lag_p99_s: Figure = None
    send_lag_p99_s_printed: str = "n/a"
    engine_running_max: Figure = None
    engine_running_max_printed: str = "n/a"
    engine_waiting_max: Figure = None
    engine_waiting_max_printed: str = "n/a"
    engine_preemptions: Figure = None
    engine_preemptions_printed: str = "n/a"
    client_limited: Figure = None
    client_limited_printed: str = "n/a"

    def figure(self, key: str) -> Figure:
        """The value of figure `key` (a POINT_FIGURES key)."""
        value: Figure = getattr(self, key)
        return value

    def printed(self, key: str) -> str:
        """The printed figure of `key`, "n/a" where the run had no such claim."""
        text: str = getattr(self, key + "_printed")
        return text


class SearchTrial(PointFigures, kw_only=True):
    """One trial of a rate search: its rate, its verdict and why, its run directory (in the search's folder).

    A search decided on intervals (`RateSearch.decision` "interval") runs a level (a rate) as one or more
    segments, each a trial; a trial's `decision` and `level_*` figures are the level's once this segment is
    pooled with the level's earlier ones (`metrics.search_decision`), and `passed` is that decision's. None in
    a search decided on the point value."""

    rate_rps: float
    passed: bool
    index: int = 0
    reason: str = ""
    run_dir: str = ""
    level: int | None = None  # the level (the rate tried) it belongs to, 0-based
    segment: int = 0  # its place in the level, 0-based: a segment > 0 was run because the level straddled
    decision: str | None = None  # pass, fail or undecided
    level_good: int | None = None
    level_requests: int | None = None
    level_attainment_pct: float | None = None
    level_attainment_low_pct: float | None = None  # the pooled attainment's 95% Wilson interval
    level_attainment_high_pct: float | None = None


class RateSearch(msgspec.Struct, kw_only=True):
    """search.json of `run load --search rate` (scenarios/load/series.py writes it after every trial)."""

    version: ClassVar[int] = 3

    schema: int = 3
    kind: str = RATE_SEARCH_KIND
    slo: dict[str, float] = {}  # seconds by SLO name
    slo_text: str = ""
    attainment: float  # the fraction of requests that must meet the SLO for a trial to pass
    decision: str = "point"  # the rule: interval, or point (what a search written before #41 was decided on)
    segments: int = 1  # the most segments a level runs (the first and those its straddling interval asked)
    resolution: str = ""  # as typed: requests/s or a share (10%)
    resolution_rps: float | None = None
    resolution_relative: float | None = None
    start_rps: float = 0.0
    maximum_rps: float = 0.0
    minimum_rps: float = 0.0
    options: JSONObject = {}  # run load's options, as a run's manifest stores them
    trials: list[SearchTrial] = []
    completed: bool = False
    interrupted: bool = False  # stopped (Ctrl-C) before it finished: its rates bound the result
    stopped: str | None = None  # why a finished search stopped: resolution, maximum, minimum
    max_rate_rps: float | None = None  # the highest passing rate: the result, or a bound where lower_bound
    min_failing_rate_rps: float | None = None  # the lowest failing rate above it
    lower_bound: bool = False  # max_rate_rps only bounds the rate meeting the SLO from below
    result: str | None = None  # the result's line; None: a search written before it was recorded


class SweepPoint(PointFigures, kw_only=True):
    """One point of a sweep: synchronous, throughput (both all at once, no rate asked) or a rate."""

    kind: str
    rate_rps: float | None = None
    index: int = 0
    run_dir: str = ""


class Sweep(msgspec.Struct, kw_only=True):
    """sweep.json of `run load --sweep` (rewritten after every point)."""

    version: ClassVar[int] = 1

    schema: int = 1
    kind: str = SWEEP_KIND
    sweep: str  # as given: rates (1,2,4,8) or auto
    points_planned: int
    options: JSONObject = {}
    points: list[SweepPoint] = []
    completed: bool = False
    interrupted: bool = False
    auto_rates_rps: list[float] | None = None  # --sweep auto: the rates spread between its first two runs


class CapacityTrial(msgspec.Struct, frozen=True):
    """One trial of a capacity search: the value tried, its verdict and why, its run directory."""

    value: int
    verdict: str
    reason: str
    run_dir: str


class CapacitySearch(msgspec.Struct, kw_only=True):
    """search.json of `run capacity --search sessions|input-tokens` (scenarios/search.py)."""

    version: ClassVar[int] = 2

    schema: int = 2
    parameter: str  # sessions or input_tokens
    fixed: JSONObject = {}  # the capacity options every trial shares
    maximum: int | None = None
    largest_pass: int | None = None
    smallest_fail: int | None = None
    lower_bound: bool = False
    interrupted: bool = False
    result: str | None = None  # the result's line; None: a search written before it was recorded
    trials: list[CapacityTrial] = []


__all__ = [
    "CapacitySearch",
    "CapacityTrial",
    "Figure",
    "PointFigures",
    "RATE_SEARCH_KIND",
    "SWEEP_KIND",
    "RateSearch",
    "SearchTrial",
    "Sweep",
    "SweepPoint",
]
