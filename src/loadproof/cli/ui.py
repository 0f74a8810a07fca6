"""Console output: progress and tables on stderr/stdout through rich; one line per error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


@contextmanager
def status(initial: str) -> Iterator[callable]:
    """A spinner line on stderr; the yielded function updates its text.

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

        say(initial)
        yield say
        return
    with err.status(initial) as spinner:
        yield lambda text: spinner.update(text)


@contextmanager
def request_progress(label: str) -> Iterator[callable]:
    """A progress bar of finished requests; the yielded function takes (done, total)."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=False) as progress:
        task = progress.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total or None)

        yield update


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    t = Table(title=title)
    for i, name in enumerate(header):
        t.add_column(name, justify="left" if i == 0 else "right", overflow="fold")
    for row in rows:
        t.add_row(*row)
    out.print(t)


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def lap(self) -> float:
        now = time.monotonic()
        elapsed, self.start = now - self.start, now
        return elapsed
