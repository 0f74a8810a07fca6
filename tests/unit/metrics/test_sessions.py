"""Multi-turn session claims from a hand-built run: cold and warm TTFT, per turn, per session, the reusable
share and the engine's hit rate, each computed by hand beside it; and the think-time syntax."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics.sessions import claims_of_run
from loadproof.plans.sessions import SessionsPlan
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from tests import rundir_values as rv

S = 1_000_000_000
T0 = 50 * S


def turn(user: int, t: int, send: float, ttft: float, prompt: int, ok: bool = True) -> RequestRecord:
    first = T0 + round((send + ttft) * S)
    return RequestRecord(request_id=f"sessions-u{user}-t{t}", endpoint="completions", scenario="sessions",
                         family="cold" if t == 0 else "warm", prompt_id=f"u{user}", batch=t, ok=ok,
                         error_kind=None if ok else "http_status", send_ns=T0 + round(send * S),
                         first_token_ns=first if ok else None, last_token_ns=first + S // 10 if ok else None,
                         end_ns=first + S // 10 + S // 100, prompt_tokens=prompt if ok else None,
                         output_tokens=4 if ok else None, chunk_ns=[first, first + S // 10] if ok else [],
                         chunk_tokens=[1, 3] if ok else [])


PLAN = SessionsPlan(users=2, turns=3, first_tokens=100, turn_tokens=20, output_tokens=4, think_time="0.5")
# user 0: cold 1.0 s at 100 tokens, warm 0.2 and 0.3 s at 130, 160; user 1: cold 1.2 s, then its turn 1 fails
RECORDS = [turn(0, 0, 0.0, 1.0, 100), turn(0, 1, 2.0, 0.2, 130), turn(0, 2, 3.0, 0.3, 160),
           turn(1, 0, 0.5, 1.2, 100), turn(1, 1, 2.5, 0.4, 0, ok=False)]
SAMPLES = [{"t_ns": T0 - S, "values": {"prefix_cache_hits_total": 10.0, "prefix_cache_queries_total": 50.0}},
           {"t_ns": T0 + 10 * S, "values": {"prefix_cache_hits_total": 210.0, "prefix_cache_queries_total": 540.0}}]


def run(records=RECORDS, samples=SAMPLES) -> Run:
    return rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(PLAN)}, records, samples=samples)


def values(r: Run) -> dict[str, object]:
    return {c.name: c.value for c in claims_of_run(r, PLAN)}


def test_cold_and_warm_turns_sessions_and_hit_rates_by_hand():
    got = values(run())
    assert got["sessions.planned_requests"] == 6 and got["sessions.requests"] == 5
    assert got["sessions.failed_requests"] == 1 and got["sessions.completed_sessions"] == 1
    assert got["sessions.ttft_s.cold.p50"] == pytest.approx(1.1) and got["sessions.ttft_s.cold.max"] == pytest.approx(1.2)
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
    records = [msgspec.structs.replace(r, cached_tokens=cached.get((int(r.prompt_id[1:]), r.batch)))
               for r in RECORDS]
    got = values(run(records))
    assert got["sessions.turn0.engine_hit_pct"] == pytest.approx(100 * 16 / 200)
    assert got["sessions.turn1.engine_hit_pct"] == pytest.approx(100 * 96 / 130)  # the failed turn not counted
    assert got["sessions.turn2.engine_hit_pct"] == pytest.approx(100 * 128 / 160)
    assert got["sessions.engine_hit_pct.cold"] == pytest.approx(100 * 16 / 200)
    assert got["sessions.engine_hit_pct.warm"] == pytest.approx(100 * 224 / 290)
    # an engine that does not report them: no such claim, rather than a zero
    assert not any("engine_hit_pct" in name for name in values(run()))


def test_think_time_syntax():
    from loadproof.scenarios.sessions import parse_think

    assert parse_think(1.5) == "1.5" and parse_think("uniform:0.5:2") == "uniform:0.5:2" and parse_think("0") == "0"
    for bad in ("-1", "uniform:2:1", "exp:3", "soon", "uniform:1"):
        with pytest.raises(ValueError, match="takes seconds X, or uniform:LOW:HIGH"):
            parse_think(bad)
