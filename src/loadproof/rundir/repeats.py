"""The summary of runs repeated as one command's series: `run SCENARIO --repeats N` (N runs one after another)
and `run ab --scenario SCENARIO` (two arms, A B B A ...). A folder of ordinary run directories with
`repeats.json` (`Repeats`), rewritten after each run, so an interrupted series keeps every finished run and
says how far it got; the folder's report.md holds the between-run table (`report.between_runs`).

Version 1 (`schema`): every field below.

Standard library and msgspec only.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import msgspec

from loadproof.rundir.json_value import JSONObject

REPEATS_JSON = "repeats.json"


class RepeatedRun(msgspec.Struct, kw_only=True):
    """One run of the series: its place, its arm (`a`/`b`, None for plain repeats), its run directory (a name
    inside the series' folder; None where the run left none), its verdict where the scenario has one, whether it
    measured anything, and how it ended where that was not a finished run (`note`)."""

    index: int
    arm: str | None = None
    run_dir: str | None = None
    verdict: str | None = None
    measured: bool = True
    note: str | None = None


class Repeats(msgspec.Struct, kw_only=True):
    """`kind`: `repeats` or `ab`; `order`: the arm of each planned run (empty for plain repeats); `arms`: each
    arm's target and sampling settings; `options`: the scenario's options, the same for every run."""

    VERSION: ClassVar[int] = 1

    schema: int = 1
    kind: Literal["repeats", "ab"]
    scenario: str
    runs_planned: int
    order: list[str] = []
    arms: dict[str, JSONObject] = {}
    options: JSONObject = {}
    runs: list[RepeatedRun] = []
    completed: bool = False
    interrupted: bool = False


__all__ = ["REPEATS_JSON", "RepeatedRun", "Repeats"]
