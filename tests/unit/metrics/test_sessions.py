"""Multi-turn session claims from a hand-built run: cold and warm TTFT, per turn, per session, the reusable
share and the engine's hit rate, each computed by hand beside it; and the think-time syntax."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics.sessions import claims_of_run
from loadproof.plans.sessions import SessionsPlan
from loadproof.records import RequestRecord, ToolCall
from loadproof.store.run_dir import Run
from tests import rundir_values as rv

S = 1_000_000_000
T0 = 50 * S


def turn(user: int, t: int, send: float, ttft: float, prompt: int, ok: bool = True) -> RequestRecord:
    first = T0 + round((send + ttft) * S)
    return RequestRecord(
        request_id=f"sessions-u{user}-t{t}",
        endpoint="completions",
        scenario="sessions",
        family="cold" if t == 0 else "warm",
        prompt_id=f"u{user}",
        batch=t,
        ok=ok,
        error_kind=None if ok else "http_status",
        send_ns=T0 + round(send * S),
        first_token_ns=first if ok else None,
        last_token_ns=first + S // 10 if ok else None,
        end_ns=first + S // 10 + S // 100,
        prompt_tokens=prompt if ok else None,
        output_tokens=4 if ok else None,
        chunk_ns=[first, first + S // 10] if ok else [],
        chunk_tokens=[1, 3] if ok else [],
    )


PLAN = SessionsPlan(users=2, turns=3, first_tokens=100, turn_tokens=20, output_tokens=4, think_time="0.5")
# user 0: cold 1.0 s at 100 tokens, warm 0.2 and 0.3 s at 130, 160; user 1: cold 1.2 s, then its turn 1 fails
RECORDS = [
    turn(0, 0, 0.0, 1.0, 100),
    turn(0, 1, 2.0, 0.2, 130),
    turn(0, 2, 3.0, 0.3, 160),
    turn(1, 0, 0.5, 1.2, 100),
    turn(1, 1, 2.5, 0.4, 0, ok=False),
]
SAMPLES = [
    {"t_ns": T0 - S, "values": {"prefix_cache_hits_total": 10.0, "prefix_cache_queries_total": 50.0}},
    {"t_ns": T0 + 10 * S, "values": {"prefix_cache_hits_total": 210.0, "prefix_cache_queries_total": 540.0}},
]


def run(records=RECORDS, samples=SAMPLES) -> Run:
    return rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(PLAN)}, records, samples=samples)


def values(r: Run) -> dict[str, object]:
    return {c.name: c.value for c in claims_of_run(r, PLAN)}


def test_cold_and_warm_turns_sessions_and_hit_rates_by_hand():
    got = values(run())
    assert got["sessions.planned_requests"] == 6 and got["sessions.requests"] == 5
    assert got["sessions.failed_requests"] == 1 and got["sessions.completed_sessions"] == 1
    assert got["sessions.ttft_s.cold.p50"] == pytest.approx(1.1) and got["sessions.ttft_s.cold.max"] == pytest.approx(
        1.2
    )
    assert got["sessions.ttft_s.warm.p50"] == pytest.approx(0.25)  # the failed turn's latency is not counted
    assert got["sessions.warm_over_cold_ttft_p50"] == pytest.approx(0.25 / 1.1)
    assert got["sessions.turn2.ttft_s.p50"] == pytest.approx(0.3) and got["sessions.turn0.context_tokens_mean"] == 100
    # the completed session: first send 0.0 to its last end 3.0 + 0.3 + 0.1 + 0.01
    assert got["sessions.session_s.max"] == pytest.approx(3.41)
    # warm turns' previous prompts: 100 (before 130) + 130 (before 160) of 100 + 130 + 160 + 100 sent
    assert got["sessions.prefix_hit_rate.reusable_pct"] == pytest.approx(100 * 230 / 490)
    assert got["sessions.prefix_hit_rate.engine_pct"] == pytest.approx(100 * 200 / 490)


def test_no_engine_rate_without_its_counters_around_the_run():
    got = values(run(samples=SAMPLES[1:]))
    assert "sessions.prefix_hit_rate.engine_pct" not in got and "sessions.prefix_hit_rate.reusable_pct" in got


def test_the_engines_reported_hits_per_turn_and_phase_by_hand():
    cached = {(0, 0): 0, (0, 1): 96, (0, 2): 128, (1, 0): 16}  # the engine's cached_tokens, per user and turn
    records = [msgspec.structs.replace(r, cached_tokens=cached.get((int(r.prompt_id[1:]), r.batch))) for r in RECORDS]
    got = values(run(records))
    assert got["sessions.turn0.engine_hit_pct"] == pytest.approx(100 * 16 / 200)
    assert got["sessions.turn1.engine_hit_pct"] == pytest.approx(100 * 96 / 130)  # the failed turn not counted
    assert got["sessions.turn2.engine_hit_pct"] == pytest.approx(100 * 128 / 160)
    assert got["sessions.engine_hit_pct.cold"] == pytest.approx(100 * 16 / 200)
    assert got["sessions.engine_hit_pct.warm"] == pytest.approx(100 * 224 / 290)
    # an engine that does not report them: no such claim, rather than a zero
    assert not any("engine_hit_pct" in name for name in values(run()))


def test_think_time_syntax():
    from loadproof.scenarios.sessions_options import parse_think

    assert parse_think(1.5) == "1.5" and parse_think("uniform:0.5:2") == "uniform:0.5:2" and parse_think("0") == "0"
    for bad in ("-1", "uniform:2:1", "exp:3", "soon", "uniform:1"):
        with pytest.raises(ValueError, match="takes seconds X, or uniform:LOW:HIGH"):
            parse_think(bad)


# agent turns and the prefix-cache expectations: 2 users x 2 turns, a 256-token shared prefix, blocks of 128;
# turn 0 calls a tool (user 0 with a call, user 1 without), turn 1 answers; one request at a time
AGENT = SessionsPlan(
    users=2,
    turns=2,
    first_tokens=100,
    turn_tokens=20,
    output_tokens=4,
    tool_turns=1,
    tool_result_tokens=150,
    tool_choice="required",
    tool_call_mode="tools",
    tool_definitions_tokens=200,
    tool_names=["read_file"],
    shared_prefix_tokens=256,
    block_tokens=128,
    kv_cache_tokens=4 * 128,
)


def agent_records() -> list[RequestRecord]:
    call = [ToolCall(name="read_file", arguments='{"target": "a"}', id="c0")]
    rows = []
    for user, t, send, prompt in ((0, 0, 0.0, 400), (1, 0, 1.5, 400), (0, 1, 3.0, 600), (1, 1, 4.5, 600)):
        r = turn(user, t, send, 0.5, prompt)
        rows.append(
            msgspec.structs.replace(
                r,
                end_ns=T0 + round((send + 1.0) * S),
                first_answer_ns=r.first_token_ns + S // 10,
                tool_calls=call if (user, t) == (0, 0) else [],
                cached_tokens={0: 0, 1: 256}[user] if t == 0 else 256,
            )
        )
    return rows


def agent_run() -> Run:
    return rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(AGENT)}, agent_records())


def test_agent_turns_and_the_expected_hits_unbounded_and_at_the_engines_size_by_hand():
    got = {c.name: c.value for c in claims_of_run(agent_run(), AGENT)}
    assert got["sessions.agent.tool_turns"] == 2 and got["sessions.agent.tool_calls"] == 1
    assert got["sessions.agent.turns_without_call"] == 1
    assert got["sessions.turn1.ttfa_s.p50"] == pytest.approx(0.6)
    # unbounded: turn 0 of user 1 finds the two shared blocks (256); each turn 1 its user's turn 0 prompt's three
    # full blocks (384 of 600)
    assert got["sessions.turn0.expected_hit_pct.unbounded"] == pytest.approx(100 * 256 / 800)
    assert got["sessions.turn1.expected_hit_pct.unbounded"] == pytest.approx(100 * 768 / 1200)
    assert got["sessions.expected_hit_pct.unbounded"] == pytest.approx(100 * 1024 / 2000)
    # 4 blocks, 3 usable: user 1's turn 0 takes the block that held user 0's history (freed last, evicted
    # first), and so on: each turn 1 finds only the shared prefix
    assert got["sessions.turn0.expected_hit_pct.bounded"] == pytest.approx(100 * 256 / 800)
    assert got["sessions.turn1.expected_hit_pct.bounded"] == pytest.approx(100 * 512 / 1200)
    assert got["sessions.expected_hit_pct.bounded"] == pytest.approx(100 * 768 / 2000)
    # shared 128, 256; each user's 384 and 512: 6 blocks, more than the 512-token cache
    assert got["sessions.working_set_tokens"] == 768 and got["sessions.expected_hit_pct.read_against"] == "bounded"
    assert got["sessions.engine_hit_pct.all"] == pytest.approx(100 * (256 + 512) / 2000)


def test_no_expectation_without_the_engines_block_size_and_no_bounded_one_without_its_cache():
    no_block = msgspec.structs.replace(AGENT, block_tokens=None)
    got = {c.name for c in claims_of_run(agent_run(), no_block)}
    assert not any("expected_hit_pct" in n or "working_set" in n for n in got) and "sessions.agent.tool_calls" in got
    unbounded_only = msgspec.structs.replace(AGENT, kv_cache_tokens=None)
    got = {c.name for c in claims_of_run(agent_run(), unbounded_only)}
    assert "sessions.expected_hit_pct.unbounded" in got and not any(".bounded" in n or "read_against" in n for n in got)
    # a run before agent turns: none of their claims
    assert not any(n.startswith("sessions.agent.") for n in values(run()))


def docs_runs(tmp_path) -> list[Run]:
    """A sessions run with agent turns, both expectations and a reasoning stream (for the docs' formulas)."""
    records = agent_records()
    records[0] = msgspec.structs.replace(records[0], reasoning_tokens=2, first_answer_ns=records[0].first_token_ns + S)
    return [rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(AGENT)}, records)]
