"""`LOADPROOF_STORE_AUTO=1`: every run a command makes is added to the results store ($LOADPROOF_STORE, else the
default SQLite file) when the command ends, passed, failed or interrupted: `loadproof run ...` (a search's trials,
`--repeats` and A/B runs included), `loadproof demo`, `loadproof tune` and `loadproof sim calibrate --grid`.

The CLI wraps each such command in `storing(out, say)` (one line in cli/run.py, demo.py, tune.py, sim.py), which notes the
run directories under `out` before the command and adds those that are new, with their claims, after it. Adding
never changes the command's outcome: a store that cannot be reached, or a run it cannot use, is one line on stderr.
(The run lifecycle in `scenarios` is the same layer as `results`, so it cannot call the store itself.)
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from loadproof.errors import LoadproofError
from loadproof.results.entry import read_run
from loadproof.results.walk import all_run_dirs

AUTO = "LOADPROOF_STORE_AUTO"
YES = ("1", "true", "yes", "on")


def enabled() -> bool:
    return os.environ.get(AUTO, "").strip().lower() in YES


@contextmanager
def storing(out: Path, say: Callable[[str], None]) -> Iterator[None]:
    """Around a command that writes runs under `out`: with LOADPROOF_STORE_AUTO set, add its new runs after it."""
    if not enabled():
        yield
        return
    before = set(all_run_dirs(out))
    try:
        yield
    finally:
        add_new(sorted(set(all_run_dirs(out)) - before), say)


def add_new(paths: list[Path], say: Callable[[str], None]) -> None:
    """Each run with claims added (each in its own transaction); every problem one line, none raised."""
    if not paths:
        return
    # the store (and SQLAlchemy, 0.1 s) imported when there is a run to add, not by every run command's start
    store_module = importlib.import_module("loadproof.results.store")
    try:
        store = store_module.open_store(None)
    except LoadproofError as exc:
        say(f"results store: not added ({exc})")
        return
    added = 0
    with store:
        for path in paths:
            try:
                added += store.add_run(read_run(path)).new
            except LoadproofError as exc:
                say(f"results store: {path.name} not added ({exc})")
    say(f"results store: {added} run(s) added to {store.shown}")
