"""Tests wait by bounded polls (tests/polling.py), never by fixed sleeps or deadline loops of their own.

The rules, checked on the syntax tree of every Python file under tests/ but tests/polling.py (issue #37):

1. No deadline: nothing adds to a clock reading (`time.monotonic() + 10`, `time.time() + ...`,
   `loop.time() + ...`); a wait that needs one calls `wait_until`/`eventually`, or `poll`/`poll_async`.
2. No `while` loop reads a clock in its condition or body: `while ...: assert time.monotonic() - t0 < 1`
   is the same deadline loop written the other way round (timing a loop that ends by itself, or a
   callback inside it, is not a `while`).
3. Every `time.sleep(...)` / `asyncio.sleep(...)` (or `sleep` imported from either) carries a comment
   starting `# sleep:` that says why it is not a wait (a server that must stay slow, a think time, a
   turn of the event loop, a sampling rate), on one of its lines or on a comment line right above it.
   A sleep before an assert is a guess at how long something takes: poll for it instead.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

from tests.python_source import parse

TESTS = Path(__file__).resolve().parents[1]
HOME = TESTS / "polling.py"  # the one place that computes deadlines and sleeps between polls
CLOCKS = {"monotonic", "monotonic_ns", "time", "time_ns", "perf_counter", "perf_counter_ns"}
SLEEPERS = {"time", "asyncio", "anyio", "trio"}
MARK = "# sleep:"


def _imported(tree: ast.Module, modules: set[str], names: set[str]) -> set[str]:
    """Local names bound by `from MODULE import NAME [as X]` for a module and name among those given."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in modules
        for alias in node.names
        if alias.name in names
    }


def _reads_clock(node: ast.AST, clocks: set[str]) -> bool:
    """A call of a clock: time.monotonic() and its kin, one imported by name, or an event loop's time()."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in clocks
    if not isinstance(func, ast.Attribute):
        return False
    if isinstance(func.value, ast.Name) and func.value.id == "time":
        return func.attr in CLOCKS
    if func.attr == "time":  # loop.time(), asyncio.get_running_loop().time()
        owner = func.value
        return (isinstance(owner, ast.Name) and owner.id == "loop") or (
            isinstance(owner, ast.Call) and getattr(owner.func, "attr", "").endswith("_loop")
        )
    return False


def _is_sleep(node: ast.AST, sleeps: set[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in sleeps
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "sleep"
        and isinstance(func.value, ast.Name)
        and func.value.id in SLEEPERS
    )


def _comments(source: str) -> dict[int, str]:
    return {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }


def _explained(node: ast.AST, lines: list[str], comments: dict[int, str]) -> bool:
    first, last = node.lineno, node.end_lineno or node.lineno
    if any(comments.get(n, "").startswith(MARK) and len(comments[n]) > len(MARK) + 2 for n in range(first, last + 1)):
        return True
    above = first - 1
    return above >= 1 and lines[above - 1].strip().startswith(MARK) and len(lines[above - 1].strip()) > len(MARK) + 2


def problems(source: str, name: str = "<source>") -> list[str]:
    """What in `source` breaks the rules above, one line each (`name:line: what`)."""
    tree = parse(source, name)
    lines = source.splitlines()
    comments = _comments(source)
    clocks = _imported(tree, {"time"}, CLOCKS)
    sleeps = _imported(tree, SLEEPERS, {"sleep"})
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            if _reads_clock(node.left, clocks) or _reads_clock(node.right, clocks):
                found.append(f"{name}:{node.lineno}: a deadline of its own: use tests/polling.py")
        elif isinstance(node, ast.While):
            inside = [node.test, *node.body]
            if any(_reads_clock(sub, clocks) for part in inside for sub in ast.walk(part)):
                found.append(f"{name}:{node.lineno}: a while loop that reads a clock: use tests/polling.py")
        elif _is_sleep(node, sleeps) and not _explained(node, lines, comments):
            found.append(f"{name}:{node.lineno}: a sleep without a `{MARK}` comment saying why it is not a wait")
    return sorted(set(found))


def test_no_test_waits_by_a_fixed_sleep_or_a_deadline_loop_of_its_own():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path != HOME:
            found += problems(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)))
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import time\ndeadline = time.monotonic() + 5\n",
        "import time\nuntil = 30 + time.time()\n",
        "from time import monotonic\nd = monotonic() + 1\n",
        "import asyncio\nd = asyncio.get_running_loop().time() + 1\n",
        "import time\nwhile not ready():\n    assert time.monotonic() - t0 < 1\n    pause()\n",
        "import time\ntime.sleep(0.1)\nassert done\n",
        "import asyncio\nasync def f():\n    await asyncio.sleep(0.1)  # give it time\n",
        "import time\ntime.sleep(1)  # sleep:\n",
        "from asyncio import sleep\nasync def f():\n    await sleep(1)\n",
    ],
    ids=["deadline", "wall-deadline", "imported-clock", "loop-time", "elapsed-loop", "bare-sleep",
         "other-comment", "empty-reason", "imported-sleep"],
)  # fmt: skip
def test_each_rule_catches_what_it_is_meant_to(source):
    assert problems(source)


@pytest.mark.parametrize(
    "source",
    [
        "import time\ntime.sleep(1.5)  # sleep: a slow engine, the behaviour under test\n",
        "import asyncio\nasync def f():\n    # sleep: a turn of the event loop\n    await asyncio.sleep(0)\n",
        "import time\nt0 = time.monotonic()\nrun()\nassert time.monotonic() - t0 < 1\n",
        "def f(clock):\n    return clock.monotonic() + 60\n",
        "async def f(clock):\n    await clock.sleep(1)\n",
    ],
    ids=["explained", "explained-above", "timing", "scripted-clock", "scripted-sleep"],
)
def test_what_is_not_a_wait_passes(source):
    assert problems(source) == []
