"""Console output: a run's live view, spinners and tables on stderr/stdout through rich; one line per error.

Every text printed here may carry what a user typed or a server said (options, prompts, model names,
paths, error messages), so none of it is read as rich markup or emoji codes: both consoles have emoji off
(`--input-tokens uniform:100:200` stays that, not an emoji for `:100:`), and text goes out as `rich.text.Text`
or with `markup=False` (`[x]` stays `[x]`); styling is set by the code, on the Text, never inside the string.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.live import Live
from rich.status import Status
from rich.table import Table
from rich.text import Text

from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.live_snapshot import END, PREPARING
from loadproof.scenarios.live_views import describe, line

out = Console(soft_wrap=True, emoji=False)
err = Console(stderr=True, soft_wrap=True, emoji=False)


@contextmanager
def status(initial: str | None) -> Iterator[Callable[[str], None]]:
    """A spinner line on stderr; the yielded function updates its text. With `initial` None nothing
    shows until the first update (work that may have nothing to do says nothing).

    Without a terminal (CI, a log file) a spinner shows nothing, so each new step is printed as a
    line instead (the running seconds after a ':' do not count as a new step).
    """
    if not err.is_terminal:
        last = [""]

        def say(text: str) -> None:
            step = text.split(":", 1)[0]
            if step != last[0]:
                last[0] = step
                err.print(step, markup=False, highlight=False)

        if initial is not None:
            say(initial)
        yield say
        return
    spinner: list[Status] = []

    def update(text: str) -> None:
        if not spinner:
            spinner.append(err.status(Text(text)))
            spinner[0].start()
        spinner[0].update(Text(text))

    if initial is not None:
        update(initial)
    try:
        yield update
    finally:
        if spinner:
            spinner[0].stop()


REFRESH_S = 0.5  # the live view's timer: at most 2 redraws a second
PLAIN_EVERY_S = 10.0  # without a terminal: the current phase's line at most this often
BRIEF_EVERY_S = 30.0  # the same for a run inside a series (a search's trial), which ends in a line of its own


class LiveView:
    """Draws a run's `LiveStatus` from a timer thread of its own, so the run's event loop never formats
    or writes anything for it.

    On a terminal: a live region redrawn every `refresh_s` (rich Live), and each phase's final line
    printed above it as the phase ends. Elsewhere (a pipe, a log file, CI): plain lines only, no escape
    codes: each phase's final line as it ends, and the current phase's line when `every_s` seconds have
    passed since the last line. Without `phase_lines` (a run inside a series, which ends in a line of its
    own) the phases' final lines are left out. Use as a context manager; `tick` is one pass of the timer.
    """

    def __init__(
        self,
        status: LiveStatus,
        console: Console | None = None,
        *,
        every_s: float = PLAIN_EVERY_S,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
        phase_lines: bool = True,
    ) -> None:
        self.status = status
        self.phase_lines = phase_lines
        self.console = console or err
        self.every_s = every_s
        self.refresh_s = refresh_s
        self.clock = clock
        self._ended = 0  # phases before this index have had their final line
        self._last_line = clock()
        self._live: Live | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            self._live = Live(console=self.console, auto_refresh=False, transient=True)
            self._live.start()
        self._thread = threading.Thread(target=self._run, name="loadproof-live-view", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.tick()  # the final lines of the phases that ended since the last pass
        finally:
            if self._live is not None:
                self._live.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_s):
            try:
                self.tick()
            except Exception as exc:  # a display fault must never stop the run it shows
                self._print(f"live view stopped: {exc!r}")
                return

    def tick(self) -> None:
        snap = self.status.snapshot()
        phases = snap.phases
        while self._ended < len(phases) - 1:
            if self.phase_lines and phases[self._ended].kind not in (PREPARING, END):
                self._print(line(snap, self._ended))
            self._ended += 1
        current = phases[-1].kind
        if self._live is not None:
            if current != END:
                heading, parts = describe(snap)
                text = Text.assemble((heading, "bold"), *[f"\n  {part}" for part in parts])
                self._live.update(text, refresh=True)
        elif current not in (PREPARING, END) and self.clock() - self._last_line >= self.every_s:
            self._print(line(snap))

    def _print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self._last_line = self.clock()


def table(title: str, header: list[str], rows: list[list[str]], console: Console | None = None) -> None:
    """A table on stdout. Names and numbers are never broken: only a column of prose (a formula, evidence,
    a reason: cells with spaces) wraps, at its spaces. Where even that cannot fit the terminal, each row
    is printed as a block instead: its first cell on a line, then `header: cell` lines."""
    console = console or out
    prose = [any(" " in row[i] for row in rows) for i in range(len(header))]
    # a column that does not wrap does not wrap its header either: it needs the whole header (else rich
    # squeezes a prose column to nothing to make room: the sessions turn table lost its turn column)
    needed = [
        max(
            [_longest_word(header[i]) if prose[i] else len(header[i])]
            + [len(row[i]) if not prose[i] else _longest_word(row[i]) for row in rows]
        )
        for i in range(len(header))
    ]
    if sum(needed) + 3 * len(header) + 1 > console.width:  # cells, padding and borders
        _blocks(title, header, rows, console)
        return
    t = Table(title=Text(title, style="table.title"))  # titles, headers and cells are data, never markup
    for i, name in enumerate(header):
        if prose[i]:
            t.add_column(Text(name), justify="left", overflow="fold", min_width=needed[i])
        else:
            t.add_column(Text(name), justify="left" if i == 0 else "right", no_wrap=True, min_width=needed[i])
    for row in rows:
        t.add_row(*(Text(cell) for cell in row))  # cells are data, never markup ("loadproof[gpu]" stays whole)
    console.print(t)


def _longest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def _blocks(title: str, header: list[str], rows: list[list[str]], console: Console) -> None:
    console.print(title, style="italic", markup=False, highlight=False, soft_wrap=False)
    for row in rows:
        console.print(row[0], style="bold", markup=False, highlight=False, soft_wrap=False, overflow="fold")
        for name, cell in zip(header[1:], row[1:]):
            if cell:
                console.print(
                    f"  {name}: {cell}" if name else f"  {cell}",
                    markup=False,
                    highlight=False,
                    soft_wrap=False,
                    overflow="fold",
                )


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        elapsed, self.start = now - self.start, now
        return elapsed
