"""Tool calls and structured output on the real embedded engine (vLLM's CPU build enforces both with its
structured outputs): a load run asking a JSON Schema answer and one requiring a tool call, every answer
checked against its schema with jsonschema and the verdict stored on its record, the valid share claimed.

An answer the engine ended itself (finish_reason stop or tool_calls) was decoded under the grammar, so it
must be valid: a disagreement is a bug in the checking (or the engine's enforcement). An answer cut at
max_tokens may be invalid, and then says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import Engine
from tests.integration.test_long_context import loadproof

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1200)]

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.fixture
def tools_engine(engine: Engine) -> Engine:
    """The session's engine: it is served with a tool-call parser (tests/integration/conftest.py), as
    the packaged profile embedded-tools serves it for users (`loadproof serve embedded-tools`)."""
    return engine


def load_run(engine, tmp_path: Path, *args: str) -> tuple[dict, list[dict]]:
    result = loadproof(
        "run",
        "load",
        "--url",
        engine.url,
        "--endpoint",
        "chat",
        "--tokenizer",
        str(engine.tokenizer),
        "--out",
        str(tmp_path),
        "--rate",
        "2",
        "-n",
        "4",
        "--input-tokens",
        "96",
        "--output-tokens",
        "160",
        "--no-ignore-eos",
        *args,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = tmp_path.glob("load-*")
    claims = {c["name"]: c["value"] for c in json.loads((run_dir / "claims.json").read_text())["claims"]}
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert claims["load.requests"] == 4 and all(r["ok"] for r in records), claims
    assert claims["load.output_checked"] == 4  # every answer checked
    assert claims["load.output_valid_pct"] == pytest.approx(100 * sum(r["output_valid"] for r in records) / 4)
    for record in records:  # ended by the engine under its grammar: valid; cut at max_tokens: may not be
        assert record["output_valid"] or record["finish_reason"] == "length", record["output_invalid_reason"]
    return claims, records


def test_a_json_schema_answer_is_checked_on_every_request(tools_engine, tmp_path: Path):
    claims, records = load_run(
        tools_engine, tmp_path, "--response-format", f"json_schema:{EXAMPLES / 'classify-schema.json'}"
    )
    assert "load.tool_calls_per_request" not in claims and claims["load.failed_requests"] == 0
    assert all(r["output_text"] for r in records)  # the answer's text kept to be checked


@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_a_forced_tool_call_is_checked_on_every_request(tools_engine, tmp_path: Path, choice: str):
    """A named tool's arguments are decoded under its own parameters (the engine's grammar); `required` under
    vLLM's array of {name, parameters} alternatives, which the small model fills past max_tokens here."""
    claims, records = load_run(
        tools_engine, tmp_path, "--tools", str(EXAMPLES / "tools-weather.json"), "--tool-choice", choice
    )
    assert claims["load.tool_calls_per_request"] >= 1
    for record in records:
        names = {c["name"] for c in record["tool_calls"]}
        assert names and names <= ({"get_weather", "get_time"} if choice == "required" else {choice}), record
