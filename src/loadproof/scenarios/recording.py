"""One run of a scenario, recorded into its directory and reported, the same for every command:

- `record`: the run directory, the manifest (a typed `rundir.Manifest`: options, target, versions, clock
  anchor) written before the first request, telemetry sampled while it runs, the manifest's end time written
  even when interrupted;
- `report` and `run_once`: claims.json, report.md and report.html from the directory alone, shown;
- `conclude`: a run that measured nothing (every request failed, or none was recorded) raises NothingMeasured
  (exit 4) with the most frequent error's own text; a FAIL verdict raises AcceptanceFailed (exit 1) with the
  scenario's `failure` line.

What is printed goes through a `Console` (the CLI's rich console), so this module needs no UI; while a
run records, the console shows its `LiveStatus` (`scenarios.live`), which the scenario keeps up to date.
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import msgspec

from loadproof.engines.base import StartupReport as EngineStartup
from loadproof.errors import AcceptanceFailed, NothingMeasured, UsageError
from loadproof.metrics.claims import Claim, criteria_of
from loadproof.metrics.claims import verdict_of as verdict_claim
from loadproof.metrics.engine_agreement import VERSION as CROSSCHECK
from loadproof.report.build import Report, build_report
from loadproof.rundir import Manifest
from loadproof.rundir.manifest import ClockAnchor, StartupReport, TargetInfo, TelemetryInfo
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.target import Target
from loadproof.store.run_dir import RunWriter
from loadproof.telemetry.sampler import TelemetrySampler

FAILURE = "see the criteria above"  # a scenario's `failure` line, unless it says more
NOT_SAMPLED = TelemetryInfo(
    sampled=False,
    note="sampling off (--sample-interval-s 0): the engine's /metrics only "
    "before and after the run, no GPU or host telemetry",
    energy_note="no GPU energy counter: sampling off (--sample-interval-s 0)",
)


class Console(Protocol):
    """Where a run's lines, live view and tables go."""

    def say(self, text: str) -> None:
        """A status line (stderr)."""

    def live(self, status: LiveStatus) -> AbstractContextManager[object]:
        """Show `status` while the context is open, redrawn on the console's own timer (the scenario
        only updates it)."""

    def show(self, report: Report) -> None:
        """The tables of a run's report."""

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None: ...

    def result(self, text: str) -> None:
        """A result line (stdout)."""


def is_verbose(console: Console) -> bool:
    """Whether the console prints everything (`loadproof -v`); a console without the setting (a log file's,
    a test's) does."""
    return bool(getattr(console, "verbose", True))


class Nested:
    """The console of one run inside a series (a rate search's trial, a sweep's point): the series says one
    line per run, so the run's own status lines, the live view's phase lines and its headline are left out,
    unless the console is verbose (`loadproof -v`). Its progress still shows: in place on a terminal, now and
    then as a plain line elsewhere (the console's `brief_live`, where it has one)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.verbose = is_verbose(console)

    def say(self, text: str) -> None:
        if self.verbose:
            self.console.say(text)

    def live(self, status: LiveStatus) -> AbstractContextManager[object]:
        brief = getattr(self.console, "brief_live", None)
        return self.console.live(status) if self.verbose or brief is None else brief(status)

    def show(self, report: Report) -> None:
        if self.verbose:
            self.console.show(report)

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        self.console.table(title, header, rows)

    def result(self, text: str) -> None:
        self.console.result(text)


class Recordable(Protocol):
    """What `record` needs of a scenario (`scenarios.base.Scenario` has it)."""

    @property
    def name(self) -> str: ...  # read only: a scenario's class names it

    options: Any
    target: Target
    status: Callable[[str], None]

    async def run(self, writer: RunWriter, manifest: Manifest, live: LiveStatus) -> object: ...


@dataclass
class Outcome:
    run_path: Path
    report: Report
    verdict: str | None


def record(scenario: Recordable, out: Path, console: Console, manifest_extra: Manifest | None = None) -> Path:
    """Create the run directory, write the manifest (`manifest_extra`'s fields, what the command sets, and
    those every run sets), run, and close the manifest even when interrupted. A run refused as a user's
    mistake before its first request (a data set left with no usable row by its filters) removes its
    directory: `runs/` keeps no run that measured nothing for that reason."""
    writer = RunWriter.create(out, scenario.name)
    manifest = common_manifest(writer.run_id, scenario.name, scenario.options, scenario.target, manifest_extra)
    # --sample-interval-s 0 (where a scenario takes it): no sampler at all, so not even NVML is opened
    sampling = getattr(scenario.options, "sample_interval_s", None) != 0
    sampler = TelemetrySampler(writer.path / "telemetry.jsonl", say=_once(console.say)) if sampling else None
    manifest.telemetry = sampler.describe() if sampler is not None else NOT_SAMPLED
    writer.write_manifest(manifest)
    console.say(f"run directory: {writer.path}")
    scenario.status = console.say
    live = LiveStatus(scenario.name, run_id=writer.run_id)
    refused = False
    try:
        with sampler if sampler is not None else contextlib.nullcontext(), console.live(live):
            try:
                asyncio.run(scenario.run(writer, manifest, live))
            finally:
                live.finish()
    except UsageError:
        refused = writer.num_records == 0
        raise
    finally:
        manifest.end_wall_time = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest.num_records = writer.num_records
        writer.write_manifest(manifest)
        writer.close()
        if refused:
            shutil.rmtree(writer.path, ignore_errors=True)
            console.say(f"run directory removed: the run was refused before its first request ({writer.path})")
    return writer.path


def report(run_path: Path, console: Console) -> Outcome:
    """Claims, report.md and report.html of a run directory, recomputed from it alone and shown."""
    built = build_report(run_path)
    console.show(built)
    return Outcome(run_path, built, verdict_of(built.claims))


def run_once(scenario: Recordable, out: Path, console: Console, manifest_extra: Manifest | None = None) -> Outcome:
    """One run of `scenario`: recorded, reported, shown."""
    return report(record(scenario, out, console, manifest_extra), console)


def conclude(outcome: Outcome, failure: str = FAILURE) -> None:
    """Exit code 4 (NothingMeasured) when the run measured nothing (every request failed, or none was
    recorded), naming the most frequent error; else exit code 1 (AcceptanceFailed) when its verdict is FAIL
    (`scenario: failure`), or when it broke its prediction contract (each figure that missed, with its error)."""
    headline = outcome.report.failures.headline()
    if headline is not None:
        raise NothingMeasured(f"{outcome.report.run.manifest.scenario}: {headline}")
    if outcome.verdict == "FAIL":
        raise AcceptanceFailed(f"{outcome.report.run.manifest.scenario}: {failure}")
    contract = [c for c in outcome.report.claims if c.name.startswith("prediction.criteria.") and c.printed == "FAIL"]
    if contract:
        raise AcceptanceFailed("the prediction contract failed: " + "; ".join(c.formula for c in contract))


def verdict_of(claims: list[Claim]) -> str | None:
    """The run's acceptance verdict (PASS or FAIL), if its scenario has one."""
    claim = verdict_claim([c for c in claims if not c.name.startswith("prediction.")])  # the scenario's own
    return claim.printed if claim is not None else None


def failed_criteria(claims: list[Claim]) -> list[Claim]:
    return [c for c in criteria_of(claims) if c.printed == "FAIL"]


def common_manifest(
    run_id: str, scenario: str, options: Any, target: Target, extra: Manifest | None = None
) -> Manifest:
    """The manifest every scenario writes before its first request: `extra` (the fields its command set: the
    profile, the price, a prediction, a series point) with the fields every run sets."""
    return msgspec.structs.replace(
        extra or Manifest(),
        run_id=run_id,
        scenario=scenario,
        options=options.model_dump(),
        target=msgspec.convert(target.describe(), TargetInfo),
        engine_version=target.served.version,
        versions=versions(),
        git=git_hash(),
        start_wall_time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        clock_anchor=clock_anchor(),
        crosscheck=CROSSCHECK,  # how this loadproof computes the crosscheck's claims: they recompute so
    )


def startup_of(report: EngineStartup | None) -> StartupReport | None:
    """The manifest's `engine.startup_report` of the report an engine adapter parsed from its log."""
    return msgspec.convert(report.as_dict(), StartupReport) if report is not None else None


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("loadproof", "aiohttp", "msgspec", "pydantic", "tokenizers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def git_hash() -> str | None:
    """The commit of the loadproof source tree, when it runs from a checkout."""
    here = Path(__file__).resolve().parent
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, timeout=5
    ).stdout.strip()
    return result.stdout.strip() + ("-dirty" if dirty else "")


def clock_anchor() -> ClockAnchor:
    """One wall-clock reading paired with the monotonic clock, to place record times in real time."""
    return ClockAnchor(wall_time_ns=time.time_ns(), perf_counter_ns=time.perf_counter_ns())


_said: set[str] = set()  # lines said once a process (the telemetry note, in a demo of six runs)


def _once(say: Callable[[str], None]) -> Callable[[str], None]:
    def once(text: str) -> None:
        if text not in _said:
            _said.add(text)
            say(text)

    return once
