"""No library code starts `loadproof` through argv (issue #37): a command that needs another's work calls the
function below that command's line, in its own process (`sim calibrate --grid` runs each capacity run through
the run lifecycle, `scenarios.lifecycle`, as `loadproof run` does), so its options are checked once, its errors
are the library's own and nothing depends on a `loadproof` on PATH or a second interpreter start.

Read with ast over src/loadproof: an argv list or tuple that starts with "loadproof" or holds "-m", "loadproof",
and `shutil.which("loadproof")`. The exceptions below start no loadproof command for its result, each with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import typer

from loadproof.cli import app
from tests.python_source import parse

SRC = Path(__file__).resolve().parents[2] / "src" / "loadproof"
# file (relative to src/loadproof) -> why its argv of `loadproof` is not a command run for its result
EXCEPTIONS = {
    # an engine kind: the supervisor launches the simulator and watches it as a process, as it does vLLM
    "engines/sim.py": "`loadproof sim` under the supervisor, an engine process",
    # `serve PD_PROFILE --dry-run` prints the relay's command line for a person to run; nothing is started
    "supervisor/serving.py": "the relay's command line, printed by --dry-run",
}
COMMANDS = set(typer.main.get_command(app).commands)  # loadproof's commands (its click group's)


def argv_of_loadproof(tree: ast.AST) -> list[int]:
    """The lines of `tree` that build an argv starting loadproof: ["loadproof", COMMAND, ...], [python, "-m",
    "loadproof", ...], or shutil.which("loadproof")."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            pairs = list(zip(words, words[1:]))
            command = len(words) > 1 and words[0] == "loadproof" and words[1] in COMMANDS
            if command or ("-m", "loadproof") in pairs:
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name == "which" and any(isinstance(a, ast.Constant) and a.value == "loadproof" for a in node.args):
                lines.append(node.lineno)
    return lines


def test_the_scan_finds_every_spelling():
    code = (
        'import shutil, sys\nA = [sys.executable, "-m", "loadproof", "run"]\nB = ("loadproof", "sim")\n'
        'C = shutil.which("loadproof")\nD = [sys.executable, "-m", "pip"]\nE = ["python", "loadproof"]\n'
        'F = ("loadproof", "aiohttp")\n'
    )
    assert argv_of_loadproof(parse(code)) == [2, 3, 4]


def test_no_library_code_starts_loadproof_through_argv():
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() not in EXCEPTIONS
        for line in argv_of_loadproof(parse(path.read_text(encoding="utf-8"), str(path)))
    ]
    assert found == [], "call the command's function in process instead of `loadproof` through argv:\n" + "\n".join(
        found
    )


def test_each_exception_still_holds_an_argv_of_loadproof():
    for name in EXCEPTIONS:
        assert argv_of_loadproof(parse((SRC / name).read_text(encoding="utf-8"), name)), f"{name}: drop the exception"
