"""Sessions against a CPU tier (metrics.session_tier), by hand: the tokens the tier should supply when the GPU
cache holds none of a user's history and the tier holds all of it, the engine's connector hits beside them,
and each warm turn's transfer, recompute estimate and bound."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics.sessions import claims_of_run
from loadproof.plans.sessions import SessionsPlan
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics.test_sessions import T0, S, turn

# four users, one after another: a cold turn of 64 tokens (0.5 s), then at 10 s + u a warm turn of 100 tokens
# whose first 64 the engine had cached (TTFT 0.1, 0.2, 0.3, 0.4 s)
RECORDS = [turn(u, 0, u, 0.5, 64) for u in range(4)] + [
    msgspec.structs.replace(turn(u, 1, 10 + u, 0.1 * (u + 1), 100), cached_tokens=64) for u in range(4)
]
SAMPLES = [
    {"t_ns": T0 - S, "values": {"external_prefix_cache_hits_total": 5.0}},
    {"t_ns": T0 + 20 * S, "values": {"external_prefix_cache_hits_total": 205.0}},
]
# a GPU cache of two blocks of 16 (one usable: nothing of a history stays) and a tier of 64 blocks (all of it)
PLAN = SessionsPlan(
    users=4,
    turns=2,
    first_tokens=60,
    turn_tokens=30,
    output_tokens=4,
    block_tokens=16,
    kv_cache_tokens=32,
    cpu_tier_tokens=1024,
    kv_bytes_per_token=1000,
    h2d_gbps=1.0,
)


def values(plan: SessionsPlan = PLAN, samples: list[dict] = SAMPLES) -> dict[str, object]:
    run: Run = rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(plan)}, RECORDS, samples=samples)
    return {c.name: c.value for c in claims_of_run(run, plan)}


def test_the_tier_should_supply_every_warm_turns_history_and_the_engines_share_of_it():
    got = values()
    # each warm turn's hit: its user's first 64 tokens, 4 full blocks ((100 - 1) // 16 allows 6); the GPU has none
    assert got["sessions.tier.expected_tokens"] == 4 * 64
    assert got["sessions.tier.served_tokens"] == 200
    assert got["sessions.tier.served_over_expected_pct"] == pytest.approx(100 * 200 / 256)
    # a tier no larger than the GPU cache supplies nothing more than the GPU would
    assert values(msgspec.structs.replace(PLAN, cpu_tier_tokens=16))["sessions.tier.expected_tokens"] == 0


def test_each_warm_turns_transfer_recompute_and_bound():
    got = values()
    per_token = 4 * 0.5 / (4 * 64)  # the cold turns' TTFT over their prompt tokens
    assert got["sessions.tier.cold_s_per_token"] == pytest.approx(per_token)
    assert got["sessions.tier.floor_s"] == pytest.approx(0.1)
    transfer = 64 * 1000 / 1e9  # 64 tokens of 1,000 bytes at 1 GB/s
    assert got["sessions.tier.transfer_s.max"] == pytest.approx(transfer)
    assert got["sessions.tier.recompute_s.p50"] == pytest.approx(64 * per_token)
    bound = 0.1 + transfer + 36 * per_token
    assert got["sessions.tier.bound_s.p50"] == pytest.approx(bound)
    assert got["sessions.tier.ttft_over_bound.max"] == pytest.approx(0.4 / bound)
    assert got["sessions.tier.within_bound_pct"] == pytest.approx(75.0)  # 0.4 s is over 0.381 s


def test_no_tier_figures_without_their_inputs():
    bare = msgspec.structs.replace(PLAN, cpu_tier_tokens=None, kv_bytes_per_token=None, h2d_gbps=None)
    assert not any(name.startswith("sessions.tier.") for name in values(bare))
    assert "sessions.tier.served_tokens" not in values(samples=[])  # no counters around the run: no figure


def docs_runs(tmp_path) -> list[Run]:  # tests/unit/metrics/test_docs_formulas.py: these claims' formulas
    return [rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(PLAN)}, RECORDS, samples=SAMPLES)]
