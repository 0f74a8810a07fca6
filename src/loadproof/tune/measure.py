"""One grid point measured for real, in this process: its profile served afresh under the supervisor
(`tune.engine.served`), then `run load --search rate` against it, the same function with the same typed
options (`LoadScenario.perform`, the tune's `LoadOptions`), then the engine stopped, whatever happened. The
logs and the search's folder stay in the point's folder; the search's search.json, read through its type
(`store.series.read_rate_search`), gives the figures, a lower bound said as one."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import IO

from loadproof.errors import AcceptanceFailed, LoadproofError, NothingMeasured
from loadproof.protocol.routes import route_of
from loadproof.report.build import Report
from loadproof.rundir.tune import Measured
from loadproof.scenarios.base import NoCommandOptions
from loadproof.scenarios.lifecycle import Checked, setup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.scenario import LoadScenario
from loadproof.store.series import SEARCH_JSON, read_rate_search
from loadproof.tune.engine import served
from loadproof.tune.grid import Point, profile_toml
from loadproof.tune.options import TuneRequest


def measure_point(point: Point, folder: Path, request: TuneRequest, say: Callable[[str], None]) -> Measured:
    """Serve `point`, search its highest rate meeting the SLO, stop it; its `Measured` line."""
    folder.mkdir(parents=True, exist_ok=True)
    profile_path = folder / "profile.toml"
    profile_path.write_text(profile_toml(point.profile), encoding="utf-8")
    serving = point.profile.serving.model_copy(update={"port": request.options.port})
    runs = folder / "runs"
    before = set(runs.glob("load-search-*"))  # an interrupted search of this point before, kept beside
    started = time.monotonic()
    with served(point.profile.model_copy(update={"serving": serving}), folder, say) as ready_s:
        say(f"  engine ready after {ready_s:.0f} s; rate search (log: {folder / 'load.log'})")
        target = request.target.model_copy(update={"profile": profile_path, "out": runs})
        use = LoadScenario.tokenizer_use(request.load, route_of(point.profile.serving.endpoint))
        checked = Checked(request.load, NoCommandOptions(), target, point.profile, use)
        with _log(folder / "load.log") as console:
            try:
                LoadScenario.perform(setup(checked), console)
            except AcceptanceFailed:  # no rate met the SLO: the search's own verdict, in its search.json
                pass
            except NothingMeasured as exc:
                raise NothingMeasured(f"the rate search of {point.name}: {exc} (see {folder / 'load.log'})") from None
    found = sorted(set(runs.glob("load-search-*")) - before)
    if not found or not (found[-1] / SEARCH_JSON).is_file():
        raise LoadproofError(f"the rate search of {point.name} left no search.json: see {folder / 'load.log'}")
    summary = read_rate_search(found[-1] / SEARCH_JSON)
    best = summary.max_rate_rps
    at_best = next((t for t in summary.trials if t.rate_rps == best), None)
    ttft = at_best.ttft_p99_s if at_best is not None else None
    return Measured(
        point=point.name,
        max_rate_rps=best,
        min_failing_rate_rps=summary.min_failing_rate_rps,
        ttft_p99_s=float(ttft) if isinstance(ttft, (int, float)) and not isinstance(ttft, bool) else None,
        lower_bound=summary.lower_bound,
        tried=[(t.rate_rps, t.passed) for t in summary.trials],
        search=found[-1].relative_to(folder).as_posix(),
        engine_ready_s=round(ready_s, 1),
        seconds=round(time.monotonic() - started, 1),
    )


class LogConsole:
    """The search's console (`scenarios.recording.Console`) written to the point's load.log: its status
    lines, tables and results as plain text, no live view."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle

    def say(self, text: str) -> None:
        self.handle.write(text + "\n")
        self.handle.flush()

    result = say

    def live(self, status: LiveStatus) -> AbstractContextManager[object]:
        return nullcontext()

    def show(self, report: Report) -> None:
        self.say(f"claims: {report.run.path / 'claims.json'}")

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        self.say("\n".join([title, " | ".join(header), *(" | ".join(row) for row in rows)]))


@contextmanager
def _log(path: Path) -> Iterator[LogConsole]:
    with open(path, "a", encoding="utf-8") as handle:
        yield LogConsole(handle)


__all__ = ["LogConsole", "measure_point"]
