"""`loadproof sim calibrate --grid`: a capacity run at each sessions x prompt tokens on a real engine, before
the fit (docs/simulator.md, "A grid on a real engine").

Each run is the capacity scenario run in this process, as `loadproof run capacity` runs it (the run
lifecycle: every option checked, the target resolved, the run recorded and reported), with probes not
scored; `--grid-arg` adds one of that command's arguments to every run, read by the same options
(`scenarios.options.cli_options`) as the command line reads them. Each run gives a lone cold TTFT (its first
session), the overhead a batch overlaps, and the decode rate of N streams at L tokens, so the fit sees batch
x context.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError
from loadproof.report.build import Report
from loadproof.scenarios.capacity import CapacityScenario
from loadproof.scenarios.lifecycle import Console, TargetOptions, check, run_once, setup
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.options import CliOption, cli_options


@dataclass(frozen=True)
class Grid:
    """`--grid`: a capacity run at each sessions x prompt tokens on a real engine, before the fit."""

    url: str
    tokenizer: str
    sessions: tuple[int, ...]
    lengths: tuple[int, ...]
    window_s: float
    out: Path
    extra: tuple[str, ...] = ()  # one more argument for every capacity run


def grid(
    url: str | None, tokenizer: str | None, concurrency: str, context: str, window_s: float, out: Path, extra: list[str]
) -> Grid:
    """The grid from the command line's text (`--concurrency 1,4,8 --context 1024,4096`), checked."""
    if not url or not tokenizer:
        raise UsageError("--grid needs --url URL and --tokenizer PATH")
    try:
        sessions = tuple(sorted({int(x) for x in concurrency.split(",") if x.strip()}))
        lengths = tuple(sorted({int(x) for x in context.split(",") if x.strip()}))
    except ValueError:
        raise UsageError("--concurrency and --context take comma-separated integers, e.g. 1,4,8") from None
    if not sessions or not lengths or min(sessions) < 1 or min(lengths) < 16:
        raise UsageError("--concurrency needs sessions >= 1 and --context prompts of 16 tokens or more")
    return Grid(url, tokenizer, sessions, lengths, window_s, out, tuple(extra))


def measure_grid(spec: Grid, console: Console) -> list[Path]:
    """Each (sessions, prompt tokens) of the grid as a capacity run of its own, one after another, in this
    process; `console` gets each point's line and each run's status lines and live view (its tables are not
    shown: the calibration's are). Returns the run directories, in order."""
    scenario = CapacityScenario
    options = cli_options(TargetOptions) + cli_options(scenario.Options) + cli_options(scenario.CommandOptions)
    quiet = _StatusOnly(console)
    made: list[Path] = []
    for length in spec.lengths:
        for n in spec.sessions:
            argv = [
                *("--url", spec.url, "--tokenizer", spec.tokenizer, "--sessions", str(n)),
                *("--input-tokens", str(length), "--window-s", f"{spec.window_s:g}", "--skip-probe-check"),
                *("--out", str(spec.out), *spec.extra),
            ]
            values = command_values(options, argv)
            if values.get("search") is not None:
                raise UsageError("--grid-arg --search: the grid measures one capacity run at each point")
            console.result(f"grid: {n} session(s) x {length:,} tokens")
            ready = setup(check(scenario, values))
            made.append(run_once(scenario.prepare(ready, quiet), ready.out, quiet, ready.manifest_extra).run_path)
    return made


def command_values(options: Sequence[CliOption], argv: Sequence[str]) -> dict[str, Any]:
    """A command's arguments (`--flag VALUE`, `--flag=VALUE`, `--flag`, `--no-flag`) as the values its options
    take, keyed by field, as the command line passes them (`scenarios.options.from_cli` reads them); a later
    one wins, as on the command line."""
    by_flag: dict[str, tuple[CliOption, bool]] = {}
    for option in options:
        by_flag.update({flag: (option, True) for flag in option.flags})
        if option.off_flag is not None:
            by_flag[option.off_flag] = (option, False)
    values: dict[str, Any] = {}
    rest = list(argv)
    while rest:
        token = rest.pop(0)
        flag, has_value, text = token.partition("=")
        if flag not in by_flag:
            raise UsageError(f"--grid-arg {token}: a capacity run has no option {flag}")
        option, on = by_flag[flag]
        if option.shape == "flag":
            if has_value:
                raise UsageError(f"--grid-arg {token}: {flag} takes no value")
            values[option.field] = on
            continue
        if not has_value:
            if not rest:
                raise UsageError(f"--grid-arg {token}: {flag} needs a value")
            text = rest.pop(0)
        if option.shape == "pairs":
            values.setdefault(option.field, []).append(text)
        else:
            values[option.field] = text
    return values


class _StatusOnly:
    """A run's console that passes on its status lines and live view and leaves out its tables and results."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def say(self, text: str) -> None:
        self.console.say(text)

    def live(self, status: LiveStatus) -> AbstractContextManager[object]:
        return self.console.live(status)

    def show(self, report: Report) -> None:
        pass

    def table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        pass

    def result(self, text: str) -> None:
        pass
