"""The checkpointed prefix-cache expectation (metrics.prefix_checkpoints): a hybrid model's sliding-window blocks
kept only before each request's replay boundary and junction, by hand; and a sessions run the embedded engine
answered (Gemma 3 on vLLM 0.32's CPU build), whose every request's cached tokens it gives exactly, where the
expectation that keeps every block expects the second user's first turn to hit the shared prefix."""

from __future__ import annotations

import msgspec
import pytest

from loadproof.metrics.prefix_cache import PrefixRequest, chained_keys, simulate
from loadproof.metrics.prefix_checkpoints import checkpointed_hits, window_blocks
from loadproof.metrics.sessions import claims_of_run
from loadproof.plans.sessions import SessionsPlan
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics.test_sessions import turn

B = 128


def request(segments: list[tuple[object, int]], prompt: int) -> PrefixRequest:
    return PrefixRequest(send_ns=0, end_ns=1, keys=chained_keys(segments, B), prompt_tokens=prompt)


def test_window_blocks_is_the_blocks_a_hit_needs_before_it():
    assert window_blocks(512, 128) == 4  # ceil(511 / 128): Gemma 3's window in vLLM's CPU blocks
    assert window_blocks(512, 16) == 32 and window_blocks(513, 128) == 4 and window_blocks(129, 128) == 1
    assert window_blocks(1, 128) == 1


def test_the_second_request_to_share_a_prefix_computes_it_again_and_the_third_hits_it():
    # three prompts of a 1,024-token shared prefix (8 blocks) and 129 tokens of their own (9 full blocks each)
    reqs = [request([("shared", 1024), (("own", k), 129)], 1153) for k in range(3)]
    full = simulate(reqs, None, B).hits
    assert full == [0, 1024, 1024]
    # the first keeps the window's 4 blocks before its replay boundary, (1153 - 1) // 128 = 9 blocks: blocks 5 to 8,
    # 8 its own; the second's scan down from block 7 finds 7, 6, 5 kept and 4 not: no run of 4, no hit; it keeps
    # blocks 4 to 7 at its junction, so the third finds 7, 6, 5, 4: 8 blocks
    assert checkpointed_hits(reqs, full, B, 512) == [0, 0, 1024]
    # a window of one block: the first's replay boundary keeps its block 8 only, so the second's scan finds no
    # block 7 kept either: a window needs its blocks just before the hit
    assert checkpointed_hits(reqs, full, B, 128) == [0, 0, 1024]


def test_a_prefix_ending_at_an_earlier_replay_boundary_is_a_hit_at_once():
    # a priming request of the shared prefix and 6 tokens: its replay boundary, 1029 // 128 = 8 blocks, is the
    # junction of every turn after it
    prime = request([("shared", 1024), ("ready", 6)], 1030)
    turns = [request([("shared", 1024), (("own", k), 129)], 1153) for k in range(2)]
    full = simulate([prime, *turns], None, B).hits
    assert checkpointed_hits([prime, *turns], full, B, 512) == full == [0, 1024, 1024]


def test_a_conversation_resumes_at_its_previous_replay_boundary():
    # turn 1 extends turn 0's 1,153 tokens: its full hit is turn 0's 9 full blocks, kept before its replay boundary
    first = request([(("u", 0), 1153)], 1153)
    second = request([(("u", 0), 1153), (("reply", 0), 80)], 1233)
    assert checkpointed_hits([first, second], [0, 1152], B, 512) == [0, 1152]
    # a turn 0 of exactly 9 blocks: its replay boundary is 8 blocks (the last token is always computed), so the
    # window's blocks 4 to 7 are kept and the next turn's scan down from block 8 resumes at 8 blocks
    exact = request([(("u", 1), 1152)], 1152)
    longer = request([(("u", 1), 1152), (("reply", 1), 80)], 1232)
    assert checkpointed_hits([exact, longer], [0, 1152], B, 512) == [0, 1024]


def test_a_short_prefix_is_a_hit_from_the_first_block_without_a_whole_window():
    # a 2-block prompt (prefix of 256) keeps blocks 0 and 1 (its replay boundary at 2, 4 wanted): a later prompt's
    # scan from block 1 finds a run of 2 reaching block 0, which vLLM counts
    reqs = [request([("p", 256), (("own", k), 10)], 266) for k in range(2)]
    assert checkpointed_hits(reqs, [0, 256], B, 512) == [0, 256]
    with pytest.raises(ValueError):
        checkpointed_hits(reqs, [0, 256], 0, 512)


# 8 users x 2 turns on the embedded engine (Gemma 3 270M, vLLM 0.32 CPU, blocks of 128, window 512), a shared
# 1,024-token system prompt, first turns 0.5 s apart (run sessions --system-tokens 1024 --first-tokens 128
# --turn-tokens 64 --output-tokens 16 --stagger-s 4, 2026-12-05): (user, turn, send s, TTFT s, prompt tokens,
# the response's cached tokens)
MEASURED = [
    (0, 0, 0.000, 0.377, 1153, 0),
    (1, 0, 0.500, 0.439, 1153, 0),
    (2, 0, 1.001, 0.149, 1153, 1024),
    (3, 0, 1.501, 0.138, 1153, 1024),
    (0, 1, 1.545, 0.178, 1233, 1152),
    (1, 1, 1.827, 0.136, 1233, 1152),
    (4, 0, 2.001, 0.201, 1153, 1024),
    (2, 1, 2.015, 0.187, 1233, 1152),
    (5, 0, 2.501, 0.155, 1153, 1024),
    (3, 1, 2.555, 0.176, 1233, 1152),
    (6, 0, 3.001, 0.109, 1153, 1024),
    (4, 1, 3.026, 0.169, 1233, 1152),
    (5, 1, 3.475, 0.172, 1233, 1152),
    (7, 0, 3.501, 0.146, 1153, 1024),
    (6, 1, 3.930, 0.129, 1233, 1152),
    (7, 1, 4.389, 0.110, 1233, 1152),
]
PLAN = SessionsPlan(
    users=8,
    turns=2,
    first_tokens=128,
    turn_tokens=64,
    system_tokens=1024,
    output_tokens=16,
    stagger_s=4.0,
    shared_prefix_tokens=1024,
    block_tokens=B,
    kv_cache_tokens=991_390,
    checkpoint_window_tokens=512,
)


def measured_run(plan: SessionsPlan = PLAN) -> Run:
    records = [
        msgspec.structs.replace(turn(u, t, send, ttft, prompt), cached_tokens=cached)
        for u, t, send, ttft, prompt, cached in MEASURED
    ]
    return rv.run_of(None, {"scenario": "sessions", "plan": msgspec.to_builtins(plan)}, records)


def test_the_checkpointed_expectation_is_every_request_the_engine_served():
    got = {c.name: c.value for c in claims_of_run(measured_run(), PLAN)}
    cold = 8 * 1153
    # every block kept: every first turn but user 0's hits the 1,024 shared tokens; the engine: user 1's did not
    assert got["sessions.turn0.expected_hit_pct.unbounded"] == pytest.approx(100 * 7 * 1024 / cold)
    assert got["sessions.turn0.checkpointed_hit_pct.unbounded"] == pytest.approx(100 * 6 * 1024 / cold)
    assert got["sessions.turn0.checkpointed_hit_pct.bounded"] == pytest.approx(100 * 6 * 1024 / cold)
    assert got["sessions.turn0.engine_hit_pct"] == pytest.approx(got["sessions.turn0.checkpointed_hit_pct.bounded"])
    assert got["sessions.turn1.checkpointed_hit_pct.bounded"] == pytest.approx(100 * 1152 / 1233)
    assert got["sessions.turn1.expected_hit_pct.bounded"] == pytest.approx(100 * 1152 / 1233)
    every = (6 * 1024 + 8 * 1152) / (cold + 8 * 1233)
    assert got["sessions.checkpointed_hit_pct.bounded"] == pytest.approx(100 * every)
    assert got["sessions.engine_hit_pct.all"] == pytest.approx(100 * every)
    assert got["sessions.expected_hit_pct.bounded"] == pytest.approx(100 * (7 * 1024 + 8 * 1152) / (cold + 8 * 1233))


def test_no_checkpointed_expectation_for_a_plan_without_the_window():
    # runs before it (and engines that keep every block): the plan has no window, and no claim names one
    plain = msgspec.structs.replace(PLAN, checkpoint_window_tokens=None)
    names = {c.name for c in claims_of_run(measured_run(plain), plain)}
    assert "sessions.expected_hit_pct.bounded" in names and not any("checkpointed" in n for n in names)


def docs_runs(tmp_path) -> list[Run]:
    """A sessions run with the checkpointed expectations (for the docs' formulas)."""
    return [measured_run()]
