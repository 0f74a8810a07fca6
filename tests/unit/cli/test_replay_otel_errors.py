"""`run replay --format otel` on a bad trace or bad options: one line naming the file, span and field, exit 2,
before any run directory (and before the server is asked anything: the URL here answers nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.workloads.test_otel_trace import chat, otlp, span

pytestmark = pytest.mark.timeout(120)
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "agent-traces" / "agent-trace.genai.jsonl"


def replay(tmp_path: Path, trace: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["run", "replay", "--url", "http://127.0.0.1:9", "--trace", trace, "--out", str(tmp_path / "runs")]
    return subprocess.run([sys.executable, "-m", "loadproof", *argv, *args], capture_output=True, text=True, timeout=90)


def written(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "trace.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


BAD_TRACES = [
    ("not json at all\n", "line 1: not OTLP JSON"),
    ({"spans": []}, "not OTLP JSON: no resourceSpans list"),
    (otlp(chat("c", "gone", 0, 1)), "span c (c): its parent gone is not in the file"),
    (otlp(chat("a", "b", 0, 1), chat("b", "a", 0, 1)), "form a cycle of parents"),
    (otlp({**chat("c", "", 0, 1), "startTimeUnixNano": "-5"}), "span c (c): startTimeUnixNano is negative"),
    (otlp({**chat("c", "", 0, 1), "endTimeUnixNano": None}), "span c (c): endTimeUnixNano missing"),
    (otlp(span("t", None, 0, 1, "execute_tool")), "no LLM span"),
    (
        otlp(span("c", None, 0, 1, "chat", gen_ai__usage__input_tokens=5)),
        "span c (c): no output token count (gen_ai.usage.output_tokens",
    ),
]


@pytest.mark.parametrize(("doc", "said"), BAD_TRACES)
def test_a_bad_trace_is_one_line_and_exit_2_before_any_run_directory(tmp_path, doc, said):
    path = written(tmp_path, doc)
    proc = replay(tmp_path, path, "--format", "otel")
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(errors) == 1 and said in errors[0] and path in errors[0], proc.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--format", "mooncake", "--session-header", "x-session-id"],
            "--session-header: a mooncake trace has no sessions (bailian, weka and otel traces do)",
        ),
        (["--format", "otel", "--session-header", "bad header"], "is not an HTTP header name"),
        (["--format", "otel", "--session-header", "Authorization"], "a header the client sets itself"),
        (["--format", "otel", "--endpoint", "completions"], "--format otel replays conversations"),
        (["--format", "otel", "--max-requests", "3"], "--max-requests: not for a recorded agent"),
        (["--format", "mooncake", "--copies", "3"], "--copies: for a recorded agent only (--format otel)"),
    ],
)
def test_options_a_trace_cannot_take_are_one_line_and_exit_2(tmp_path, args, said):
    proc = replay(tmp_path, str(FIXTURE), *args)
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(errors) == 1 and said in errors[0], proc.stderr
    assert not (tmp_path / "runs").exists()
