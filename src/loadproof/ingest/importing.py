"""`loadproof import FILE` below the command line: read the file whole (every refusal before anything is
written), write one run directory per run in it (`ingest.rundir`), and its claims and reports as `loadproof
report` writes them."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from loadproof.config.profile import resolve_profile
from loadproof.ingest.detect import AUTO, check_tool, read_results
from loadproof.ingest.parsed import ParsedRun
from loadproof.ingest.rundir import write_run
from loadproof.report.build import Report, build_report


@dataclass(frozen=True)
class Imported:
    parsed: ParsedRun
    report: Report

    @property
    def path(self) -> Path:
        return self.report.run.path


def import_results(path: Path, out: Path, tool: str = AUTO, profile: str | None = None) -> list[Imported]:
    """The runs of `path` (see the module doc); `profile`: the deployment they measured (a file or a packaged
    name), kept in each run's manifest for `sim calibrate`."""
    check_tool(tool)
    deployment = resolve_profile(profile) if profile is not None else None
    parsed = read_results(path, tool)
    written: list[Path] = []
    done = []
    try:
        for run in parsed:
            written.append(write_run(run, out, deployment))
            done.append(Imported(run, build_report(written[-1])))
    except BaseException:
        for folder in written:  # nothing half-imported is left behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return done
