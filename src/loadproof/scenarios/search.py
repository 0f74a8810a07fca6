"""Capacity search: the largest N (or L) that passes, found with real runs.

Bracketing first (double from the start value while trials pass, up to the maximum), then bisection
between the largest pass and the smallest failure until they are `resolution` apart (`search`, which
only decides what to try next). `capacity_search` runs it: every trial is a full capacity run through
the run lifecycle, in its own run directory inside the search's folder; `search.jsonl` gets a line as
each trial ends, and `search.json` the result, an interrupted search's too (`interrupted: true`); both
typed (`rundir.series.CapacityTrial`, `CapacitySearch`, read back by `store.series.read_capacity_search`).

The largest pass is the result only where a trial above it failed and the search finished; where every
value up to the maximum passed, or the search was interrupted (Ctrl-C, exit 130), it is a lower bound,
and the result line and search.json (`lower_bound`) say so first. A search none of whose trials measured
anything (every request failed) is NothingMeasured (exit 4), with the engine's own words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from loadproof.config.base import one_line
from loadproof.errors import AcceptanceFailed, NothingMeasured
from loadproof.metrics.claims import criterion_name
from loadproof.rundir.series import CapacitySearch, CapacityTrial
from loadproof.scenarios.base import Setup
from loadproof.scenarios.recording import Console, Nested, failed_criteria, is_verbose, run_once
from loadproof.store.run_dir import new_run_id
from loadproof.store.series import SEARCH_JSON, encode_line, write_document

# the largest value a search tries unless --search-max says otherwise
SEARCH_MAXIMUM = {"sessions": 256, "input_tokens": 1_048_576}


Trial = CapacityTrial  # (value, verdict, reason, run_dir): a line of search.jsonl


@dataclass
class SearchResult:
    parameter: str
    trials: list[Trial] = field(default_factory=list)
    largest_pass: int | None = None
    smallest_fail: int | None = None
    maximum: int | None = None  # the largest value the search would try
    interrupted: bool = False

    @classmethod
    def of(cls, parameter: str, trials: list[Trial], maximum: int, interrupted: bool) -> SearchResult:
        """The result its finished trials give (an interrupted search's)."""
        passed = [t.value for t in trials if t.verdict == "PASS"]
        largest = max(passed, default=None)
        failed = [t.value for t in trials if t.verdict != "PASS" and (largest is None or t.value > largest)]
        return cls(parameter, list(trials), largest, min(failed, default=None), maximum, interrupted)

    @property
    def lower_bound(self) -> bool:
        """Whether the largest pass only bounds the result from below: nothing above it failed, or the
        search did not finish."""
        return self.largest_pass is not None and (self.smallest_fail is None or self.interrupted)

    @property
    def summary(self) -> str:
        head = f"search interrupted after {len(self.trials)} finished trial(s): " if self.interrupted else ""
        if self.largest_pass is None:
            return head + f"no {self.parameter} passed (smallest tried: {self.trials[0].value if self.trials else '-'})"
        if not self.lower_bound:
            return f"largest passing {self.parameter}: {self.largest_pass}, {self.smallest_fail} fails"
        below = f", below {self.smallest_fail} (a trial failed there)" if self.smallest_fail is not None else ""
        why = (
            "the search did not finish"
            if self.interrupted
            else f"every value tried passed, up to the maximum {self.maximum}; raise --search-max to find where "
            "it fails"
        )
        return (
            f"{head}a lower bound, not a result: the largest passing {self.parameter} is at least "
            f"{self.largest_pass}{below} ({why})"
        )


def search(
    parameter: str,
    start: int,
    maximum: int,
    run_trial: Callable[[int], Trial],
    resolution: int = 1,
    on_trial: Callable[[Trial], None] | None = None,
) -> SearchResult:
    if not 1 <= start <= maximum:
        raise ValueError(f"start {start} must lie in [1, {maximum}]")
    result = SearchResult(parameter, maximum=maximum)

    def attempt(value: int) -> bool:
        trial = run_trial(value)
        result.trials.append(trial)
        if on_trial is not None:
            on_trial(trial)
        return trial.verdict == "PASS"

    value = start
    while True:
        if attempt(value):
            result.largest_pass = value
            if value >= maximum:
                return result
            value = min(value * 2, maximum)
        else:
            result.smallest_fail = value
            break
    low = result.largest_pass or 0
    high = result.smallest_fail
    while high - low > resolution:
        mid = (low + high) // 2
        if mid <= 0 or mid == low:
            break
        if attempt(mid):
            low = result.largest_pass = mid
        else:
            high = result.smallest_fail = mid
    return result


def resolution_of(key: str, start: int) -> int:
    """How close the largest pass and the smallest failure must come: one session, or 1/16 of the
    starting length (at least 64 tokens)."""
    return 1 if key == "sessions" else max(64, start // 16)


def capacity_search(scenario: Any, setup: Setup, console: Console) -> SearchResult:
    """The largest passing `setup.command.search` ('sessions' or 'input-tokens') of capacity runs with
    `setup.options`; AcceptanceFailed when none passed, NothingMeasured when no trial measured anything."""
    key = setup.command.search.replace("-", "_")
    maximum = setup.command.search_max or SEARCH_MAXIMUM[key]
    folder = setup.out / new_run_id("capacity-search")
    folder.mkdir(parents=True)
    console.say(f"search directory: {folder}")
    base = setup.options.model_dump()
    _ = setup.target  # resolved once, before the first trial, and kept by every trial's setup
    finished: list[Trial] = []
    nothing: list[str] = []  # each trial's line where it measured nothing

    def trial(value: int) -> Trial:
        console.say(f"trial {key} = {value}")
        trial_setup = _with_options(setup, {**base, key: value})
        quiet = Nested(console)  # one line a trial; its own lines with -v
        outcome = run_once(scenario.prepare(trial_setup, quiet), folder, quiet, trial_setup.manifest_extra)
        failed = failed_criteria(outcome.report.claims)
        reason = f"{criterion_name(failed[0])}: {failed[0].formula}" if failed else "every criterion passed"
        headline = outcome.report.failures.headline()
        if headline is not None:  # every request failed: the engine's own words say why
            nothing.append(headline)
            reason = headline
        console.say(f"  {outcome.verdict}: {reason}")
        return Trial(value, outcome.verdict or "FAIL", reason, outcome.run_path.name)

    def record(t: Trial) -> None:
        finished.append(t)
        with open(folder / "search.jsonl", "a", encoding="utf-8") as handle:
            handle.write(encode_line(t) + "\n")

    start = base[key]
    try:
        result = search(key, min(start, maximum), maximum, trial, resolution=resolution_of(key, start), on_trial=record)
    except KeyboardInterrupt:
        _finish(folder, key, base, SearchResult.of(key, finished, maximum, interrupted=True), console)
        console.say(
            f"search interrupted after {len(finished)} finished trial(s) (kept in {folder}); the trial under way "
            "keeps what it finished in its own run directory"
        )
        raise
    _finish(folder, key, base, result, console)
    if result.trials and len(nothing) == len(result.trials):
        raise NothingMeasured(f"capacity search: no trial measured anything; the last: {nothing[-1]}")
    if result.largest_pass is None:
        raise AcceptanceFailed(result.summary)
    return result


def _finish(folder: Path, key: str, base: dict[str, Any], result: SearchResult, console: Console) -> None:
    """search.json and the console's result, the result first (a lower bound says so before its value), then
    the trials' table."""
    console.result(result.summary)
    summary = CapacitySearch(
        parameter=key,
        fixed={k: v for k, v in base.items() if k != key},
        maximum=result.maximum,
        largest_pass=result.largest_pass,
        smallest_fail=result.smallest_fail,
        lower_bound=result.lower_bound,
        interrupted=result.interrupted,
        result=result.summary,
        trials=list(result.trials),
    )
    write_document(folder / SEARCH_JSON, summary)
    if result.trials:
        console.table(
            f"Capacity search over {key}",
            [key, "verdict", "reason"] + (["run"] if is_verbose(console) else []),
            [[str(t.value), t.verdict, t.reason] + ([t.run_dir] if is_verbose(console) else []) for t in result.trials],
        )
    console.result(f"search: {folder / SEARCH_JSON}; each trial's report.html is in its run directory")


def _with_options(setup: Setup, values: dict[str, Any]) -> Setup:
    """`setup` with its options replaced by `values` (validated: a bisection can step below a bound)."""
    try:
        options = type(setup.options).model_validate(values)
    except ValidationError as exc:
        raise one_line(exc, "capacity options") from None
    return replace(setup, options=options)  # the manifest's fields: shared, each prepare replaces them
