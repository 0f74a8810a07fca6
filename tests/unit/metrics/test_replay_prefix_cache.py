"""The prefix cache at the engine's size (metrics/prefix_cache.py): block keys, and hits through an LRU block
pool with running requests pinned, every expected figure worked out by hand in the comments."""

from __future__ import annotations

from loadproof.metrics.prefix_cache import PrefixRequest, chained_keys, mooncake_segments, simulate, working_set_tokens

S = 1_000_000_000


def req(t: int, end: int, ids: list[int], tokens: int | None = None, out: int = 0, block: int = 4) -> PrefixRequest:
    """A prompt of one trace block per id (4 tokens each unless `tokens` cuts it), blocks of 4 tokens."""
    tokens = tokens if tokens is not None else 4 * len(ids)
    keys = chained_keys(mooncake_segments(tokens, ids, 4), block)
    return PrefixRequest(send_ns=t * S, end_ns=end * S, keys=keys, prompt_tokens=tokens, output_tokens=out)


def test_chained_keys_name_each_full_block_by_the_segments_before_its_end():
    # segments a:5, b:6 with blocks of 4: block 0 ends at 4 inside a; block 1 ends at 8, 3 tokens into b;
    # the last 3 tokens make no full block
    assert chained_keys([("a", 5), ("b", 6)], 4) == [(("a",), 4), (("a", "b"), 3)]
    # the same first segment, another second one: the first block is shared, the second is not
    assert chained_keys([("a", 5), ("c", 6)], 4)[0] == (("a",), 4)
    assert chained_keys([("a", 5), ("c", 6)], 4)[1] != (("a", "b"), 3)
    # a shorter segment of the same id shares the longer one's blocks up to its length
    assert chained_keys([("a", 9)], 4)[:2] == chained_keys([("a", 8)], 4)
    # trace blocks of 8 in engine blocks of 4, after one token of leading overhead: 1 + 8 + 5 = 14 tokens,
    # 3 full blocks ending at 4 (3 tokens into h1), 8 (7 into h1), 12 (3 into h2)
    segs = mooncake_segments(13, [1, 2], 8, lead_tokens=1)
    assert segs == [(("lead",), 1), (1, 8), (2, 5)]
    assert chained_keys(segs, 4) == [((("lead",), 1), 3), ((("lead",), 1), 7), ((("lead",), 1, 2), 3)]


def test_unbounded_hits_are_the_leading_blocks_seen_before_less_the_last_token():
    # request 1 shares blocks 1, 2 of request 0; its third block differs. Request 2 is request 0 again:
    # three blocks cached but the last prompt token is always computed, so (12 - 1) // 4 = 2 blocks hit
    reqs = [req(0, 1, [1, 2, 3]), req(2, 3, [1, 2, 4]), req(4, 5, [1, 2, 3])]
    assert simulate(reqs, None, 4).hits == [0, 8, 8]
    # one more token makes all three blocks hittable
    reqs = [req(0, 1, [1, 2, 3]), req(4, 5, [1, 2, 3, 9], tokens=13)]
    assert simulate(reqs, None, 4).hits == [0, 12]


def test_least_recently_used_blocks_are_evicted_first():
    # a pool of 5 blocks: one is the null block, 4 usable. A=[1,2] then B=[3,4] fill it; C=[5,6] needs two
    # and takes the least recently freed: A's. So A again misses, and B (freed after A) still hits.
    a, b, c = [1, 2, 7], [3, 4, 8], [5, 6, 9]  # 3 blocks each, the third makes (12 - 1) // 4 = 2 hittable
    reqs = [
        req(0, 1, a, tokens=8),
        req(2, 3, b, tokens=8),
        req(4, 5, c, tokens=8),
        req(6, 7, b, tokens=9),
        req(8, 9, a, tokens=9),
    ]
    # request 3: B's two blocks hit ((9 - 1) // 4 = 2), it takes one more block (its cut third) from the
    # head: C's tail; request 4: A was evicted by C: cold
    assert simulate(reqs, 5, 4).hits == [0, 0, 0, 8, 0]
    # unbounded, both return hit whole
    assert simulate(reqs, None, 4).hits == [0, 0, 0, 8, 8]


def test_a_request_frees_its_blocks_tail_first_so_its_head_outlives_its_tail():
    # 4 usable blocks. A = 4 blocks [1,2,3,4]; then B = 2 fresh blocks evicts the two least recently
    # freed: A's last two (freed first). A's head [1,2] still hits for a request that shares it.
    reqs = [req(0, 1, [1, 2, 3, 4]), req(2, 3, [5, 6]), req(4, 5, [1, 2, 3, 4], tokens=16)]
    out = simulate(reqs, 5, 4)
    # request 2 hits blocks 1, 2 (8 tokens) only; then needs 2 blocks: takes B's (least recently freed)
    assert out.hits == [0, 0, 8]
    assert out.evictions == 4  # B evicted A's 3 and 4; request 2 evicted B's 5 and 6


def test_blocks_of_a_running_request_are_pinned_and_shared():
    # 4 usable blocks. A [1,2] runs from 0 to 10. B [3,4] (0..1), C [5,6] at 2 needs 2 blocks: only B's
    # are free (A's are pinned), so B is evicted, A survives; D = A's prefix at 3 hits while A runs.
    reqs = [req(0, 10, [1, 2]), req(0, 1, [3, 4]), req(2, 3, [5, 6]), req(3, 4, [1, 2], tokens=9), req(5, 6, [3, 4])]
    out = simulate(reqs, 5, 4)
    assert out.hits == [0, 0, 0, 8, 0]
    assert out.short_blocks == 0


def test_output_blocks_take_room_and_a_pool_pinned_whole_counts_short_blocks():
    # 3 usable blocks. A: 8 prompt tokens + 4 output = 3 blocks, the third its output's. B at 1, while A
    # runs, needs 2: none free: short 2 blocks
    reqs = [req(0, 5, [1, 2], out=4), req(1, 2, [3, 4])]
    out = simulate(reqs, 4, 4)
    assert out.short_blocks == 2 and out.hits == [0, 0]
    # A's output block is freed with the rest and evicted like any other: C = 2 fresh blocks after A ended
    # takes the output block (freed first: the tail) and A's second block; A's first block still hits
    reqs = [req(0, 5, [1, 2], out=4), req(6, 7, [3, 4]), req(8, 9, [1, 2, 9], tokens=9)]
    assert simulate(reqs, 4, 4).hits == [0, 0, 4]


def test_the_unhashed_last_block_is_reused_before_any_cached_one():
    # 4 usable. A: 6 tokens = 1 full block [1] + a partly filled one (no hash: to the head when freed).
    # B: 2 fresh blocks: the partial slot (head) and the never-used ones first: A's full block survives
    reqs = [req(0, 1, [1, 2], tokens=6), req(2, 3, [3, 4]), req(4, 5, [5]), req(6, 7, [1, 9], tokens=5)]
    # after A: free = [partial, unused, unused, A1]; B takes partial + unused; C takes unused; D hits A1
    assert simulate(reqs, 5, 4).hits == [0, 0, 0, 4]


def test_working_set_counts_distinct_prompt_blocks():
    reqs = [req(0, 1, [1, 2, 3]), req(2, 3, [1, 2, 4]), req(4, 5, [5])]
    assert working_set_tokens(reqs, 4) == 5 * 4
