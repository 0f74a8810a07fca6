"""The linter, the formatter and the type checker run as tests, so the README's test command (and CI) runs them.

ruff and mypy are pinned in the test extras (pyproject.toml): a new release can find new things, and the
suite must fail only on a change of ours. Their settings live in pyproject.toml; mypy is strict on the pure
side (records, units, rundir, plans, metrics, verify), which verifies a stranger's bundle.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ["src", "tests", "benchmarks", "scripts"]
BIN = Path(sys.executable).parent
# an ignore says what it ignores and why: the code after `noqa:` or in `type: ignore[...]`, then the reason
IGNORE = re.compile(r"#\s*(noqa|type:\s*ignore)\b(?P<rest>.*)$")
REASONED = re.compile(r"^(:\s*[A-Z]+\d+(,\s*[A-Z]+\d+)*|\[[a-z-]+(,\s*[a-z-]+)*\])\s+(#\s*)?\S.*\w")


def _run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def test_ruff_finds_nothing() -> None:
    done = _run(str(BIN / "ruff"), "check", "--no-cache", "--output-format", "concise", *TREES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tree_is_formatted() -> None:
    done = _run(str(BIN / "ruff"), "format", "--no-cache", "--check", *TREES)
    assert done.returncode == 0, "run `scripts/in-venv ruff format src tests benchmarks scripts`:\n" + done.stdout


@pytest.mark.timeout(900)
def test_mypy_finds_nothing() -> None:
    done = _run(sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache"), timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_every_ignore_names_what_and_why() -> None:
    bare = []
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if path == Path(__file__).resolve():  # its own examples below are strings, not ignores
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if (m := IGNORE.search(line)) and not REASONED.match(m["rest"].strip()):
                    bare.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert bare == [], "\n".join(bare)


@pytest.mark.parametrize(
    ("comment", "reasoned"),
    [
        ("# noqa: E731 (a lambda keeps the table readable)", True),
        ("# type: ignore[arg-type]  # msgspec's stub is narrower than its behaviour", True),
        ("# noqa: E731", False),
        ("# noqa", False),
        ("# type: ignore[arg-type]", False),
        ("# type: ignore", False),
    ],
)
def test_the_ignore_rule_tells_a_reason_from_none(comment: str, reasoned: bool) -> None:
    m = IGNORE.search(f"x = 1  {comment}")
    assert m is not None
    assert bool(REASONED.match(m["rest"].strip())) is reasoned
