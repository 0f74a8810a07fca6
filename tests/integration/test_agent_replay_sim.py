"""`run replay --format otel` against the simulator (a real process, with vLLM's prefix cache by block hashes):
the suite's recorded openai-agents trace, by both instrumentations, replayed as several copies. Checked from the
run directory against the spans, independently of the claims: one request per LLM span of each copy, no request
sent before a call it depends on ended, each copy its own session in the header's plan, prefixes shared (the
engine's hits as the plan's block ids promise); the recorded pace never before its offset; the bundle verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadproof.workloads.otel_trace import read_otel_trace
from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(240)

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "agent-traces"


def replay(tmp_path: Path, trace: Path, *args: str) -> tuple[int, dict, Path]:
    """`run replay --format otel` of `trace` against a simulator of its own."""
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim:
        return run_scenario(sim, tmp_path, "replay", "--trace", str(trace), "--format", "otel", *args)


def records_of(run: Path) -> dict[int, dict]:
    return {r["batch"]: r for r in map(json.loads, (run / "requests.jsonl").read_text().splitlines())}


@pytest.mark.parametrize("name", ["agent-trace.genai.jsonl", "agent-trace.openinference.jsonl"])
def test_the_recorded_agent_replays_in_its_order_with_its_prefixes_shared(tmp_path: Path, name: str):
    trace = TRACES / name
    llm = read_otel_trace(str(trace)).of_kind("llm")
    code, claims, run = replay(
        tmp_path,
        trace,
        "--copies",
        "3",
        "--copy-interval-s",
        "0.2",
        "--session-header",
        "x-session-id",
        "--input-scale",
        "4",
    )
    assert code == 0, claims
    value = {n: c["value"] for n, c in claims.items()}
    plan = json.loads((run / "manifest.json").read_text())["plan"]
    records = records_of(run)
    # one request per LLM span of each copy, each of its span
    assert len(records) == len(llm) * 3 == value["replay.agent.requests_expected"] == value["replay.requests"]
    assert plan["agent"]["spans"] == [s.span_id for s in llm] * 3
    assert all(r["ok"] for r in records.values()) and value["replay.input_tokens_mismatched"] == 0
    # the order, from the records: no request before the end of a call it depends on
    deps = plan["agent"]["deps"]
    assert sum(len(d) for d in deps) == 3 * 3  # fork, sequence, join in each copy
    for i, r in records.items():
        assert all(r["send_ns"] >= records[j]["end_ns"] for j in deps[i]), i
    assert value["replay.agent.order_violations"] == 0 and value["replay.agent.verdict"] == "PASS"
    assert value["replay.agent.forks"] == value["replay.agent.joins"] == 3
    # each copy a session of its own, all its calls in it
    sessions = plan["sessions"]
    assert len(set(sessions)) == 3 and plan["session_header"] == "x-session-id" and value["replay.sessions"] == 3
    assert all(len({sessions[c * len(llm) + k] for k in range(len(llm))}) == 1 for c in range(3))
    # prefixes shared: the orchestrator's second call extends its first, copies share the system messages
    expected, engine = value["replay.prefix_hit_rate.expected_pct"], value["replay.prefix_hit_rate.engine_pct"]
    assert expected > 10 and abs(expected - engine) < 2, (expected, engine)
    publish_and_verify(run, tmp_path / "bundle")


def test_the_recorded_pace_sends_nothing_before_its_recorded_offset(tmp_path: Path):
    trace = TRACES / "agent-trace.genai.jsonl"
    llm = read_otel_trace(str(trace)).of_kind("llm")
    code, claims, run = replay(tmp_path, trace, "--pace", "recorded", "--time-scale", "4")
    assert code == 0, claims
    records = records_of(run)
    events = [json.loads(e) for e in (run / "events.jsonl").read_text().splitlines()]
    (start,) = [e["t_ns"] for e in events if e["kind"] == "schedule_start"]
    for k, span in enumerate(llm):
        assert records[k]["send_ns"] - start >= (span.start_ns - llm[0].start_ns) / 4, k
    # the last call came after the sub-agent's last ended, by at least its recorded gap / 4
    gap_ns = (llm[3].start_ns - llm[2].end_ns) / 4
    assert records[3]["send_ns"] - records[2]["end_ns"] >= gap_ns
