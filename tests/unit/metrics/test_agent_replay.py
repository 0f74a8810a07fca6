"""A recorded agent's replay claims from hand-built records: requests replayed against LLM spans x copies, the
order kept (a request sent before its dependency ended), the send delay past each request's allowed time computed
by hand, forks and joins counted, the verdict; and the replay's prefix claims on the agent's block ids."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics.replay import claims_of_run
from loadproof.plans.agent_replay import AgentReplay
from loadproof.plans.replay import ReplayPlan
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from tests import rundir_values as rv

S = 1_000_000_000
T0 = 100 * S

# two copies, 1 s apart, of three calls: A; B forks after A and waits 0.5 s (its tool); C joins B
AGENT = AgentReplay(
    pace="deps",
    copies=2,
    copy_interval_s=1.0,
    llm_spans=3,
    tool_spans=1,
    agent_spans=2,
    tokens_per_char=0.25,
    fit_error_pct=4.5,
    spans=["a", "b", "c"] * 2,
    copy=[0, 0, 0, 1, 1, 1],
    deps=[[], [0], [1], [], [3], [4]],
    links=[[], ["fork"], ["join"], [], ["fork"], ["join"]],
    wait_s=[0.0, 0.5, 0.0, 0.0, 0.5, 0.0],
    floor_s=[0.0] * 6,
    think_s=[0.0, 0.5, 0.0, 0.0, 0.5, 0.0],
    gap_s=[0.0, 0.5, 0.01, 0.0, 0.5, 0.01],
    recorded_input_tokens=[40, 45, 95] * 2,
    output_tokens=[4] * 6,
    messages=[2, 2, 4] * 2,
    tools=[0] * 6,
)


def plan(agent: AgentReplay = AGENT) -> ReplayPlan:
    # prompts of 32, 40 and 48 tokens in blocks of 16; C extends A (its first two blocks); copy 1 shares the
    # first block (the system message) with copy 0
    return ReplayPlan(
        trace="agent.jsonl",
        format="otel",
        sha256="cd" * 32,
        trace_rows=9,
        planned_requests=6,
        schedule_span_s=2.0,
        block_tokens=16,
        overhead_tokens=0,
        text_tokens=[32, 40, 48] * 2,
        hash_ids=[[1, 2], [3, 4, 5], [1, 2, 6], [1, 7], [8, 9, 10], [1, 7, 11]],
        sessions=["s-0"] * 3 + ["s-1"] * 3,
        session_header="x-session-id",
        agent=agent,
    )


def rec(i: int, send: float, end: float, intended: float | None = None) -> RequestRecord:
    return RequestRecord(
        request_id=f"replay-{i}",
        endpoint="chat",
        scenario="replay",
        family="trace",
        batch=i,
        ok=True,
        send_ns=T0 + round(send * S),
        first_token_ns=T0 + round((send + 0.1) * S),
        last_token_ns=T0 + round(end * S),
        end_ns=T0 + round(end * S),
        intended_send_ns=T0 + round((send if intended is None else intended) * S),
        prompt_tokens=[32, 40, 48][i % 3],
        output_tokens=4,
        planned_output_tokens=4,
        chunk_ns=[T0 + round((send + 0.1) * S)],
        chunk_tokens=[4],
    )


def kept() -> list[RequestRecord]:
    # copy 0: A 0-1; B allowed 1.5, sent 1.6; C allowed 2.0 (B's end), sent 2.0
    # copy 1: A allowed 1.0 (its copy's start), sent 1.0; B allowed 2.5, sent 2.5; C sent 3.2 (B ended 3.0)
    return [
        rec(0, 0.0, 1.0),
        rec(1, 1.6, 2.0, 1.5),
        rec(2, 2.0, 3.0),
        rec(3, 1.0, 2.0),
        rec(4, 2.5, 3.0),
        rec(5, 3.2, 4.0, 3.0),
    ]


def run(records: list[RequestRecord], p: ReplayPlan | None = None) -> Run:
    return rv.run_of(
        None,
        {"scenario": "replay", "plan": msgspec.to_builtins(p or plan())},
        records,
        events=[{"kind": "schedule_start", "t_ns": T0}],
    )


def values(r: Run) -> dict[str, object]:
    return {c.name: c.value for c in claims_of_run(r, msgspec.convert(r.manifest.plan, ReplayPlan))}


def docs_runs(tmp_path):
    """A recorded agent replayed, its order kept: every replay.agent.* claim and replay.sessions."""
    return [run(kept())]


def test_a_replay_that_kept_the_order_and_the_waits_passes():
    got = values(run(kept()))
    assert got["replay.agent.requests_expected"] == 6 and got["replay.agent.requests_replayed"] == 6
    assert got["replay.agent.order_violations"] == 0 and got["replay.agent.forks"] == got["replay.agent.joins"] == 2
    # send - allowed: 0, 0.1, 0, 0, 0, 0.2 -> p50 0, max 0.2
    assert got["replay.agent.send_delay_s.p50"] == pytest.approx(0.0, abs=1e-9)
    assert got["replay.agent.send_delay_s.max"] == pytest.approx(0.2, abs=1e-9)
    assert got["replay.agent.verdict"] == "PASS" and got["replay.agent.criteria.waits_kept"] == "PASS"
    assert got["replay.sessions"] == 2 and got["replay.agent.prompt_fit_error_pct"] == 4.5
    # expected hits: A 0, B 0, C 32 (A's two whole blocks), A' 16 (the shared first block), B' 0, C' 32 (A''s
    # two whole blocks: 1, 7): 80 of 240 prompt tokens
    assert got["replay.prefix_hit_rate.expected_pct"] == pytest.approx(100 * 80 / 240)


def test_a_request_sent_before_its_dependency_ended_fails_the_order():
    records = kept()
    records[5] = rec(5, 2.9, 4.0)  # C' sent at 2.9, B' ended at 3.0
    records[4] = rec(4, 2.4, 3.0)  # B' sent 0.1 s before its tool time had passed (allowed 2.5)
    got = values(run(records))
    assert got["replay.agent.order_violations"] == 1
    assert got["replay.agent.criteria.order_kept"] == "FAIL" and got["replay.agent.verdict"] == "FAIL"
    assert got["replay.agent.criteria.waits_kept"] == "FAIL"
    assert got["replay.agent.send_delay_s.max"] == pytest.approx(0.1, abs=1e-9)  # B (0.1 late)


def test_an_interrupted_replay_counts_what_was_sent_and_a_dependant_of_an_unsent_request_breaks_the_order():
    records = [r for r in kept() if r.batch != 1]  # B never sent, yet C was
    got = values(run(records))
    assert got["replay.agent.requests_replayed"] == 5 and got["replay.agent.requests_expected"] == 6
    assert got["replay.agent.order_violations"] == 1 and got["replay.agent.forks"] == 1
    assert values(run(kept()[:1]))["replay.agent.verdict"] == "PASS"


def test_recorded_pace_allows_no_send_before_the_copys_start_plus_the_offset():
    agent = msgspec.structs.replace(AGENT, pace="recorded", floor_s=[0.0, 1.7, 3.5] * 2)
    records = kept()  # copy 0's B was sent at 1.6, before its offset (1.7): 0.1 s early
    got = values(run(records, plan(agent)))
    assert got["replay.agent.criteria.waits_kept"] == "FAIL" and got["replay.agent.criteria.order_kept"] == "PASS"
