"""Console output: progress and tables on stderr/stdout through rich; one line per error."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.status import Status
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


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
            spinner.append(err.status(text))
            spinner[0].start()
        spinner[0].update(text)

    if initial is not None:
        update(initial)
    try:
        yield update
    finally:
        if spinner:
            spinner[0].stop()


@contextmanager
def request_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar of finished requests; the yielded function takes (done, total)."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as progress:
        task = progress.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total or None)

        yield update


def table(title: str, header: list[str], rows: list[list[str]], console: Console | None = None) -> None:
    """A table on stdout. Names and numbers are never broken: only a column of prose (a formula, evidence,
    a reason: cells with spaces) wraps, at its spaces. Where even that cannot fit the terminal, each row
    is printed as a block instead: its first cell on a line, then `header: cell` lines."""
    console = console or out
    prose = [any(" " in row[i] for row in rows) for i in range(len(header))]
    needed = [max([_longest_word(header[i])] + [len(row[i]) if not prose[i] else _longest_word(row[i]) for row in rows])
              for i in range(len(header))]
    if sum(needed) + 3 * len(header) + 1 > console.width:  # cells, padding and borders
        _blocks(title, header, rows, console)
        return
    t = Table(title=title)
    for i, name in enumerate(header):
        if prose[i]:
            t.add_column(name, justify="left", overflow="fold", min_width=needed[i])
        else:
            t.add_column(name, justify="left" if i == 0 else "right", no_wrap=True, min_width=needed[i])
    for row in rows:
        t.add_row(*row)
    console.print(t)


def _longest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def _blocks(title: str, header: list[str], rows: list[list[str]], console: Console) -> None:
    console.print(title, style="italic", markup=False, highlight=False, soft_wrap=False)
    for row in rows:
        console.print(row[0], style="bold", markup=False, highlight=False, soft_wrap=False, overflow="fold")
        for name, cell in zip(header[1:], row[1:]):
            if cell:
                console.print(f"  {name}: {cell}" if name else f"  {cell}", markup=False, highlight=False,
                              soft_wrap=False, overflow="fold")


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        elapsed, self.start = now - self.start, now
        return elapsed
