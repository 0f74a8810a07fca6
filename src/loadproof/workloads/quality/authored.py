"""Short authored tasks (English, Chinese, code), each with a programmatic checker.

`loadproof/data/quality/authored.jsonl`, one task a line: `id`, `lang` (en, zh, code), `prompt` (never
stored in a run), `check` (the checker spec) and `reference` (an answer the checker accepts; tests hold
every checker to it). Checker kinds, each turning an answer into `(extracted, expected, correct)`:

- `number`: the first number in the answer equals `expected` (thousands commas dropped, `12.0` == `12`);
- `exact`: the first non-empty line, stripped of quotes, backticks and a trailing period, equals
  `expected` (`casefold: true` ignores case; spaces after commas are normalized);
- `word`: the first word of the answer (Latin letters, or the first run of CJK characters) is one of
  `accept`;
- `json`: the first JSON value in the answer equals `expected` (compared as canonical JSON);
- `python`: a function named `function` is taken from the answer and called with each of `calls` in a
  separate, resource-limited Python process with a timeout (see `run_python`); its results must equal
  `expected`. Model output is never executed in loadproof's own process.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import resources
from typing import Any

AUTHORED_FILE = "authored.jsonl"
LANGS = ("en", "zh", "code")
MAX_EXTRACTED_CHARS = 64  # an extracted answer is short; a long one is cut, so no prompt echo is stored whole
PYTHON_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Task:
    id: str
    lang: str
    prompt: str
    check: dict[str, Any]
    reference: str

    @property
    def multiline(self) -> bool:
        """Whether the answer may span lines (JSON, code): a base model is then stopped at a blank line only."""
        return self.check["kind"] in ("json", "python")


def load_tasks() -> list[Task]:
    path = resources.files("loadproof") / "data" / "quality" / AUTHORED_FILE
    return [
        Task(row["id"], row["lang"], row["prompt"], row["check"], row["reference"])
        for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if row
    ]


# A base model needs to see the answer format once: two worked exemplars, none of them a task below.
_SHOTS = (
    "Question: What is 11 + 8? Reply with the number only.\nAnswer: 19\n\n"
    "Question: Write the word 'bird' in capital letters. Reply with the word only.\nAnswer: BIRD\n\n"
)


def completion_prompt(task: Task) -> str:
    """Few-shot completion prompt for base models; chat models get `task.prompt` alone."""
    return f"{_SHOTS}Question: {task.prompt}\nAnswer:"


def check(task: Task, answer: str) -> dict[str, Any]:
    """The answer row fields: `extracted`, `expected`, `correct`."""
    spec = task.check
    kind = spec["kind"]
    if kind == "number":
        got = first_number(answer)
        expected = canonical_number(spec["expected"])
        return _row(got, expected, got == expected)
    if kind == "exact":
        got = first_line(answer)
        fold = spec.get("casefold", False)
        expected = spec["expected"]
        return _row(got, expected, got is not None and _norm(got, fold) == _norm(expected, fold))
    if kind == "word":
        got = first_word(answer)
        accept = [a.casefold() for a in spec["accept"]]
        return _row(got, spec["accept"][0], got is not None and got.casefold() in accept)
    if kind == "json":
        got = first_json(answer)
        expected = _canonical_json(spec["expected"])
        return _row(got, expected, got == expected)
    if kind == "python":
        expected = _canonical_json(spec["expected"])
        code = python_source(answer, spec["function"])
        if code is None:
            return _row(None, expected, False)
        got = run_python(code, spec["function"], spec["calls"])
        return _row(got, expected, got == expected)
    raise ValueError(f"task {task.id}: unknown checker kind {kind!r}")


def _row(extracted: str | None, expected: str | None, correct: bool) -> dict[str, Any]:
    if extracted is not None and len(extracted) > MAX_EXTRACTED_CHARS:
        extracted = extracted[:MAX_EXTRACTED_CHARS] + "…"
    return {"extracted": extracted, "expected": expected, "correct": bool(correct)}


_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")  # commas only as thousands


def canonical_number(text: str) -> str | None:
    try:
        value = float(str(text).replace(",", ""))
    except ValueError:
        return None
    return str(int(value)) if value.is_integer() else repr(value)


def first_number(answer: str) -> str | None:
    match = _NUMBER.search(answer)
    return canonical_number(match.group(0)) if match else None


def first_line(answer: str) -> str | None:
    for line in answer.strip().splitlines():
        for _ in range(2):  # `'word'.` and `'word.'` alike
            line = line.strip().strip("`").strip().strip("\"'“”‘’「」").strip().removesuffix(".").removesuffix("。")
        if line:
            return line
    return None


def _norm(text: str, casefold: bool) -> str:
    text = re.sub(r"\s*,\s*", ", ", text.strip())
    return text.casefold() if casefold else text


_WORD = re.compile(r"[A-Za-z]+|[\u3400-\u9fff]+")


def first_word(answer: str) -> str | None:
    match = _WORD.search(answer)
    return match.group(0) if match else None


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def first_json(answer: str) -> str | None:
    """The first JSON object or array in the answer, canonical; None when there is none."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", answer):
        try:
            value, _ = decoder.raw_decode(answer, match.start())
        except json.JSONDecodeError:
            continue
        return _canonical_json(value)
    return None


def python_source(answer: str, function: str) -> str | None:
    """From `def <function>(` to the end of the answer, code fences removed; None if there is no such def."""
    text = re.sub(r"```[a-zA-Z]*", "", answer)
    start = text.find(f"def {function}(")
    if start < 0:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    indent = text[line_start:start]
    lines = text[line_start:].splitlines()
    # a base model often writes the body at the indentation of its first line: dedent by that much
    if indent.strip() == "":
        lines = [line[len(indent) :] if line.startswith(indent) else line for line in lines]
    return "\n".join(lines).strip() + "\n"


# runs in the child: the candidate sees only these builtins; stdout carries one JSON line
_HARNESS = r"""
import json, sys
data = json.loads(sys.stdin.read())
allowed = ("abs", "all", "any", "bool", "dict", "enumerate", "filter", "float", "int", "isinstance", "len",
           "list", "map", "max", "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple",
           "zip", "True", "False", "None", "ValueError", "TypeError", "Exception")
import builtins
namespace = {"__builtins__": {k: getattr(builtins, k) for k in allowed}}
try:
    exec(compile(data["code"], "<answer>", "exec"), namespace)
    fn = namespace[data["function"]]
    results = [fn(*args) for args in data["calls"]]
    print(json.dumps({"results": results}))
except BaseException as exc:
    print(json.dumps({"error": type(exc).__name__}))
"""


def _limit_child() -> None:  # pragma: no cover - runs in the child process
    resource.setrlimit(resource.RLIMIT_CPU, (2, 2))
    resource.setrlimit(resource.RLIMIT_AS, (512 * 2**20, 512 * 2**20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    os.setsid()


def run_python(code: str, function: str, calls: list[list[Any]], timeout_s: float = PYTHON_TIMEOUT_S) -> str:
    """Results of calling `function` defined by `code` on each argument list, as canonical JSON, or
    `error: <reason>`. The code runs in a separate `python -I -S` process (isolated mode, empty
    environment, a temporary working directory, CPU/memory/file-size/open-file limits, only a few
    builtins, no imports): a guard against accidents in a model's answer, not a security sandbox."""
    payload = json.dumps({"code": code, "function": function, "calls": calls})
    with tempfile.TemporaryDirectory(prefix="loadproof-check-") as cwd:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-c", _HARNESS],
                input=payload,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                cwd=cwd,
                env={},
                preexec_fn=_limit_child if os.name == "posix" else None,
            )
        except subprocess.TimeoutExpired:
            return "error: timeout"
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return f"error: exit {done.returncode}"
    if "error" in result:
        return f"error: {result['error']}"
    return _canonical_json(result["results"])
