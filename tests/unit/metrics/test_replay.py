"""Replay claims from a hand-built run: the load figures under `replay.*`, the expected prefix-cache hit rate
from the plan's hash ids computed by hand, and the engine's from its counters."""

from __future__ import annotations

import copy

import msgspec

from loadproof.metrics.figures import tables_of
from loadproof.metrics.replay import claims_of_run, expected_hits, figures
from loadproof.plans.replay import ReplayPlan
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = test_load.S
T0 = test_load.T0


def plan(**changes) -> ReplayPlan:
    # 8 requests of 64 planned tokens (63 text + 1 overhead), blocks of 16 tokens (test_load's 7 records
    # are requests 0..6)
    base = ReplayPlan(
        trace="data/t.jsonl",
        format="mooncake",
        sha256="ab" * 32,
        trace_rows=8,
        planned_requests=8,
        schedule_span_s=7.0,
        block_tokens=16,
        overhead_tokens=1,
        slo={"ttft": 0.5, "tpot": 0.1},
        text_tokens=[63] * 7 + [64],
        hash_ids=[
            [1, 2, 3, 4],
            [1, 2, 5, 6],
            [1, 2, 5, 7],
            [8, 9, 10, 11],
            [1, 9, 10, 11],
            [1, 2, 3, 4],
            [12, 13, 14, 15],
            [1, 2, 3, 4],
        ],
    )
    return msgspec.structs.replace(base, **changes)


def records():
    out = []
    for r in copy.deepcopy(test_load.RECORDS):
        r.scenario = "replay"
        r.request_id = r.request_id.replace("load", "replay")
        out.append(r)
    return out


def samples(hits_before=100.0, hits_after=148.0, queries_before=1000.0, queries_after=1448.0):
    return [
        {
            "t_ns": T0 - S,
            "values": {
                "prefix_cache_hits_total": hits_before,
                "prefix_cache_queries_total": queries_before,
                "num_preemptions_total": 0.0,
            },
        },
        {
            "t_ns": T0 + 20 * S,
            "values": {
                "prefix_cache_hits_total": hits_after,
                "prefix_cache_queries_total": queries_after,
                "num_preemptions_total": 0.0,
            },
        },
    ]


def run(p=None, recs=None, samp=None) -> Run:
    p = p or plan()
    return rv.run_of(
        None,
        {"scenario": "replay", "plan": msgspec.to_builtins(p)},
        recs if recs is not None else records(),
        samples=samp if samp is not None else samples(),
        events=test_load.EVENTS,
    )


def values(r: Run) -> dict[str, object]:
    return {c.name: c.value for c in claims_of_run(r, msgspec.convert(r.manifest.plan, ReplayPlan))}


def test_expected_hits_count_leading_blocks_carried_whole_before():
    # request 0 cold; 1 shares 1,2; 2 shares 1,2,5; 3 cold; 4 shares 1 only (9 follows 8 elsewhere: another
    # prefix, another block for the engine); 5 shares 1,2,3 (request 0 carried only 63 // 16 = 3 blocks
    # whole); 6 cold; 7 (64 tokens) the same three, as block 4 was never whole before it
    assert expected_hits(plan().text_tokens, plan().hash_ids, 16) == [0, 32, 48, 0, 16, 48, 0, 48]
    # a block carried only as a cut last block is not whole: no hit for it
    assert expected_hits([40, 64], [[1, 2, 3], [1, 2, 3, 4]], 16) == [0, 32]


def test_replay_claims_are_the_load_figures_renamed_plus_the_prefix_hit_rates():
    got = values(run())
    load = test_load.claims()
    for name, value in load.items():
        if name.startswith("load."):
            assert got["replay." + name[len("load.") :]] == value, name
    assert not any(name.startswith("load.") for name in got)
    # records 0..6 were sent (batch = index): hits 0+32+48+0+16+48+0 = 144 of 7 x 64 = 448 prompt tokens
    assert abs(got["replay.prefix_hit_rate.expected_pct"] - 100 * 144 / 448) < 1e-9
    assert got["replay.engine_prefix_cache_hits"] == 48 and got["replay.engine_prefix_cache_queries"] == 448
    assert abs(got["replay.prefix_hit_rate.engine_pct"] - 100 * 48 / 448) < 1e-9
    assert got["replay.capped_inputs"] == 0 and got["replay.trace"].startswith(
        "mooncake trace abababababab: 8 requests"
    )


def test_the_engines_reported_hits_are_summed_over_the_successful_requests_that_report_them():
    recs = records()
    for i, r in enumerate(recs):
        r.cached_tokens = 16 * i if i % 2 == 0 else None  # requests 1, 3, 5 report nothing
    got = values(run(recs=recs))
    ok = [r for r in recs if r.ok and r.cached_tokens is not None and r.prompt_tokens]
    assert ok, "the hand-built records have successful requests that report"
    assert (
        abs(
            got["replay.prefix_hit_rate.reported_pct"]
            - 100 * sum(r.cached_tokens for r in ok) / sum(r.prompt_tokens for r in ok)
        )
        < 1e-9
    )
    assert "replay.prefix_hit_rate.reported_pct" not in values(run())  # nothing reported: no claim


def test_only_the_requests_sent_count_toward_the_expected_rate():
    got = values(run(recs=records()[:2]))  # an interrupted run: requests 0 and 1
    assert abs(got["replay.prefix_hit_rate.expected_pct"] - 100 * 32 / 128) < 1e-9


def test_without_prefix_counters_no_engine_rate_is_claimed_and_without_hash_ids_nothing_is_shared():
    got = values(run(p=plan(format="azure", hash_ids=[]), samp=[]))
    assert got["replay.prefix_hit_rate.expected_pct"] == 0
    assert "replay.prefix_hit_rate.engine_pct" not in got


def test_the_expectation_at_the_engines_size_beside_the_unbounded_one():
    # KV blocks of 16 tokens; each prompt 1 + 63 tokens = 4 full blocks, and 4 output tokens: 5 blocks a
    # request; requests 0..6 never overlap; request 4 (HTTP 500, no first token) never held a block, so
    # the model leaves it out: 6 requests, 384 prompt tokens. A pool of 6 blocks (5 usable, the null block
    # apart) holds one request: request 1 still finds request 0's first two blocks (its last prompt block
    # and the unhashed partial block went first), request 2 finds 1, 2 and request 1's third (48); request 3
    # (4 fresh blocks and its partial) evicts everything before it, so request 5 finds nothing: 80 of 384
    got = values(run(p=plan(kv_blocks=6, kv_block_tokens=16, kv_source="options")))
    assert abs(got["replay.prefix_hit_rate.bounded_pct"] - 100 * 80 / 384) < 1e-9
    # unbounded, in whole KV blocks: 0 + 32 + 48 + 0 + 48 + 0 (request 5 is request 0 again: 3 blocks)
    assert abs(got["replay.prefix_hit_rate.unbounded_blocks_pct"] - 100 * 128 / 384) < 1e-9
    # distinct prompt blocks: 4 + 2 + 1 + 4 + 0 + 4 = 15 x 16 = 240 tokens > 5 x 16 = 80 usable
    assert got["replay.prefix_hit_rate.read_against"] == "bounded"
    assert "240 tokens (3.0x the cache)" in got["replay.prefix_cache.size"]
    assert abs(got["replay.prefix_hit_rate.engine_minus_read_against_pp"] - (100 * 48 / 448 - 100 * 80 / 384)) < 1e-9
    # a cache that holds the whole working set: read against the unbounded (expected_pct) figure
    big = values(run(p=plan(kv_blocks=1000, kv_block_tokens=16, kv_source="metrics")))
    assert big["replay.prefix_hit_rate.read_against"] == "unbounded"
    assert abs(big["replay.prefix_hit_rate.bounded_pct"] - 100 * 128 / 384) < 1e-9
    assert abs(big["replay.prefix_hit_rate.engine_minus_read_against_pp"] - 100 * (48 - 144) / 448) < 1e-9
    # no size known (an older plan): no bounded claim
    assert not any(
        name.startswith(("replay.prefix_cache.", "replay.prefix_hit_rate.bounded")) for name in values(run())
    )


def docs_runs(tmp_path):
    """A replay with the engine's KV cache size known: every bounded-expectation claim."""
    return [run(p=plan(kv_blocks=6, kv_block_tokens=16, kv_source="options"))]


def test_the_report_says_which_expectation_the_engines_rate_is_read_against():
    r = run(p=plan(kv_blocks=6, kv_block_tokens=16, kv_source="options"))
    p = msgspec.convert(r.manifest.plan, ReplayPlan)
    (table,) = tables_of(figures(r, p, claims_of_run(r, p)))
    assert "read the engine's rate against the expectation at its size (bounded)" in " ".join(table.intro)
    assert [row[0] for row in table.rows][:4] == [
        "expected, unbounded cache (trace blocks)",
        "expected, unbounded cache (the engine's KV blocks)",
        "expected, a cache of the engine's size (LRU, running pinned)",
        "the engine's counters",
    ]
    r = run()
    p = msgspec.convert(r.manifest.plan, ReplayPlan)
    (table,) = tables_of(figures(r, p, claims_of_run(r, p)))
    assert "unknown" in table.intro[0]
