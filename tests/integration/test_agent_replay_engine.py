"""`run replay --format otel` against the real embedded engine: the suite's recorded openai-agents trace (an
orchestrator, a sub-agent called as a tool, a function tool) replayed as four copies, each a session. From the run
directory, independently of the claims: one request per LLM span of each copy, none sent before a call it depends
on ended; and the engine's own prefix-cache counters grew by hits (the orchestrator's second call extends its
first, the copies share the system messages), as the plan's block ids promise.

The engine's KV blocks are 128 tokens and the recorded calls 40 to 95 tokens long, too short to share a whole
block: `--input-scale 8` sizes each prompt to 8 times its recorded input, every message scaled alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadproof.workloads.otel_trace import read_otel_trace
from tests.integration.test_long_context import run

pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "agent-traces" / "agent-trace.genai.jsonl"
COPIES = 4


def test_the_recorded_agent_replays_in_order_and_the_engine_hits_its_shared_prefixes(engine, tmp_path: Path):
    calls = read_otel_trace(str(TRACE)).of_kind("llm")
    result, claims, run_dir = run(
        "replay",
        engine,
        tmp_path,
        "--endpoint",
        "chat",
        "--trace",
        str(TRACE),
        "--format",
        "otel",
        "--copies",
        str(COPIES),
        "--copy-interval-s",
        "0.5",
        "--input-scale",
        "8",
        "--session-header",
        "x-session-id",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    value = {name: c["value"] for name, c in claims.items()}
    plan = json.loads((run_dir / "manifest.json").read_text())["plan"]
    records = {r["batch"]: r for r in map(json.loads, (run_dir / "requests.jsonl").read_text().splitlines())}
    assert len(records) == len(calls) * COPIES == value["replay.agent.requests_expected"]
    assert all(r["ok"] for r in records.values()) and value["replay.input_tokens_mismatched"] == 0
    for i, r in records.items():  # the order, from the records
        assert all(r["send_ns"] >= records[j]["end_ns"] for j in plan["agent"]["deps"][i]), i
    assert value["replay.agent.order_violations"] == 0 and value["replay.agent.verdict"] == "PASS"
    assert value["replay.agent.forks"] == value["replay.agent.joins"] == COPIES
    assert plan["block_tokens"] == 128  # the engine's KV block, from its /metrics
    expected, engine_pct = value["replay.prefix_hit_rate.expected_pct"], value["replay.prefix_hit_rate.engine_pct"]
    assert value["replay.engine_prefix_cache_hits"] > 0 and expected > 20
    assert abs(engine_pct - expected) < 5, (expected, engine_pct)
