"""A tune's files (`loadproof tune`, docs/simulator.md "Tuning"): `tune.jsonl`, its journal, a line as each
step ends, and `tune.json`, the table written at the end.

The journal's first line (`TuneStarted`, kind `tune`) says what the tune is (`TuneSpec`: the profile and
the sim profile with their sha256, the grid, and `run load`'s options every search holds, as a run's
manifest stores them); then one `Predicted` line per grid point and one `Measured` line per real run. Each
point's rate search, predicted or measured, gives the highest passing rate, the lowest failing one above
it, the TTFT p99 at the former, the rates tried, and `lower_bound`: whether that rate only bounds the rate
meeting the SLO from below (no rate above it failed), so it is never shown as the maximum.

Versions (the first line's `schema`; every line of a journal has its first line's version; `tune.json`'s
own):
- 1: no `schema`. The first line's `tune.options` held the tune's options flat (`slo`, `attainment`, `rate`,
  `search_max`, `search_resolution`, `duration_s`, `input_tokens`, `output_tokens`, `seed`, `grid`,
  `tokenizer`); the points had no `lower_bound` (the reader sets it where no failing rate was found);
  tune.json was a bare list of points.
- 2: `schema` 2; the spec holds `grid`, `load` (run load's options) and `tokenizer`; tune.json is an object
  with `schema` and `points`.

Standard library and msgspec only.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from loadproof.rundir.json_value import JSONObject

Setting = str | int | float | bool  # a grid value, a TOML scalar


class TuneSpec(msgspec.Struct, kw_only=True):
    """What a tune is: a folder holding another is refused, the same one resumed."""

    profile: str  # the deployment profile's file name
    sim: str  # the sim profile's file name
    sha256: dict[str, str]  # of each, by file name
    grid: list[str]  # each --grid KEY=V1,V2,... as given
    load: JSONObject  # run load's options every search holds (--search rate), as a run's manifest stores them
    tokenizer: str | None = None


class TuneStarted(msgspec.Struct, kw_only=True, tag_field="kind", tag="tune"):
    """The journal's first line."""

    version: ClassVar[int] = 2

    schema: int = 2
    tune: TuneSpec


class SearchOutcome(msgspec.Struct, kw_only=True):
    """A point's rate search, predicted or measured."""

    point: str  # the grid point's name (`max_num_seqs=8`)
    max_rate_rps: float | None = None  # the highest passing rate (None: no rate passed)
    min_failing_rate_rps: float | None = None
    ttft_p99_s: float | None = None  # at max_rate_rps
    lower_bound: bool = False  # max_rate_rps is a lower bound: no rate above it failed
    tried: list[tuple[float, bool]] = []  # (rate, passed), in the order tried


class Predicted(SearchOutcome, kw_only=True, tag_field="kind", tag="predicted"):
    """A point predicted on the simulator's virtual clock."""

    kv_gib: float  # the KV memory the profile gives the engine on all its GPUs


class Measured(SearchOutcome, kw_only=True, tag_field="kind", tag="measured"):
    """A point measured for real: its engine served afresh, `run load --search rate` against it."""

    search: str  # the search's folder, relative to the point's folder
    engine_ready_s: float
    seconds: float  # the whole measurement, the engine's start included


JournalLine = TuneStarted | Predicted | Measured


class TunePoint(msgspec.Struct, kw_only=True):
    """One row of the tune's table."""

    point: str
    settings: dict[str, Setting]  # profile path -> value
    predicted: Predicted
    measured: Measured | None = None
    pruned: str = ""  # why it was not measured
    error_pct: float | None = None  # predicted vs measured max rate, % of the measured; None where either bounds


class TuneTable(msgspec.Struct, kw_only=True):
    """tune.json."""

    version: ClassVar[int] = 2

    schema: int = 2
    points: list[TunePoint] = []


__all__ = [
    "JournalLine",
    "Measured",
    "Predicted",
    "SearchOutcome",
    "Setting",
    "TunePoint",
    "TuneSpec",
    "TuneStarted",
    "TuneTable",
]
