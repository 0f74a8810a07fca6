"""The router policy models (routing.Router, routing.assign): each policy's decision as vllm-router's source makes it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadproof.routing import MODELLED_POLICIES, ROUTER_POLICIES, PrefixTree, Routed, Router, assign


def prompt(name: str, n: int) -> tuple[str, ...]:
    return tuple(f"{name}{i}" for i in range(n))


@settings(max_examples=50, derandomize=True)
@given(replicas=st.integers(1, 6), requests=st.integers(0, 60), seed=st.integers(0, 3))
def test_round_robin_balances_within_one(replicas: int, requests: int, seed: int) -> None:
    router = Router("round_robin", replicas, seed=seed)
    picks = [router.pick(prompt("p", 3), None, [5] * replicas) for _ in range(requests)]
    assert picks == [i % replicas for i in range(requests)]
    assert max(router.decisions) - min(router.decisions) <= 1
    assert sum(router.decisions) == requests


@settings(max_examples=30, derandomize=True)
@given(sessions=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=30), replicas=st.integers(2, 5))
def test_consistent_hash_keeps_a_session_on_one_replica(sessions: list[str], replicas: int) -> None:
    router = Router("consistent_hash", replicas)
    first: dict[str, int] = {}
    for turn, session in enumerate(sessions * 3):
        loads = [(turn * 7 + r) % 5 for r in range(replicas)]  # loads do not move a session
        replica = router.pick(prompt(f"{session}-{turn}", 4), session, loads)
        assert first.setdefault(session, replica) == replica


def test_consistent_hash_spreads_sessions_and_hashes_bodies_without_one() -> None:
    router = Router("consistent_hash", 3)
    used = {router.pick(prompt("x", 2), f"session-{i}", [0, 0, 0]) for i in range(50)}
    assert used == {0, 1, 2}
    same = {router.pick(prompt("body", 5), None, [0, 0, 0]) for _ in range(5)}
    assert len(same) == 1  # the same body, the same replica
    bodies = {router.pick(prompt(f"body{i}-", 5), None, [0, 0, 0]) for i in range(50)}
    assert bodies == {0, 1, 2}  # without a session, each body lands by its own hash


def test_cache_aware_keeps_a_shared_prefix_on_one_replica() -> None:
    router = Router("cache_aware", 4)
    system = prompt("system", 8)
    picks = [router.pick(system + prompt(f"user{i}-", 2), None, [i % 3, 1, 2, 0]) for i in range(20)]
    # the first goes to the least loaded (replica 0 at load 0); 8 of 10 blocks match after it: above 0.3
    assert set(picks) == {0}


def test_cache_aware_spreads_distinct_prompts_to_the_least_loaded() -> None:
    router = Router("cache_aware", 3)
    assert router.pick(prompt("a", 6), None, [2, 1, 3]) == 1
    assert router.pick(prompt("b", 6), None, [0, 1, 3]) == 0
    assert router.pick(prompt("c", 6), None, [4, 4, 3]) == 2
    assert router.pick(prompt("d", 6), None, [3, 3, 3]) == 0  # a tie: the first (Rust's min_by_key)


def test_cache_aware_threshold_is_strictly_above() -> None:
    router = Router("cache_aware", 2, cache_threshold=0.3)
    router.pick(prompt("s", 3), None, [0, 0])  # on replica 0
    # 3 of 10 blocks match: 0.3 is not above 0.3, so the least loaded (replica 1)
    assert router.pick(prompt("s", 3) + prompt("t", 7), None, [1, 0]) == 1
    # 3 of 9: above it, replica 0 though it is busier
    assert router.pick(prompt("s", 3) + prompt("u", 6), None, [1, 0]) == 0


def test_cache_aware_balances_when_loads_are_imbalanced() -> None:
    router = Router("cache_aware", 2)
    router.pick(prompt("s", 10), None, [0, 0])  # the prefix on replica 0
    # 65 apart (> 64) and 65 > 0 * 1.5: imbalanced, so the least loaded though replica 0 holds every block
    assert router.pick(prompt("s", 10), None, [65, 0]) == 1
    # 64 apart is not more than 64: balanced, the match wins
    assert router.pick(prompt("s", 10), None, [64, 0]) == 0
    # 100 apart but 150 is not above 100 * 1.5: balanced
    assert router.pick(prompt("s", 10), None, [150, 100]) == 0


def test_cache_aware_names_the_replica_that_first_reached_the_deepest_block() -> None:
    router = Router("cache_aware", 2, balance_abs_threshold=0)
    router.pick(prompt("s", 4), None, [0, 0])  # replica 0
    router.pick(prompt("s", 4) + prompt("x", 4), None, [9, 0])  # imbalanced: replica 1, which now holds s0..x3
    # s0..s3 were reached first by replica 0; x0..x3 only by replica 1
    assert router.pick(prompt("s", 4) + prompt("y", 1), None, [1, 1]) == 0
    assert router.pick(prompt("s", 4) + prompt("x", 4), None, [1, 1]) == 1


def test_prefix_tree_evicts_least_recent_leaves_first() -> None:
    tree = PrefixTree(1, cache_blocks=6)
    tree.insert(prompt("a", 4), 0)
    tree.insert(prompt("b", 4), 0)
    assert tree.size(0) == 6
    assert tree.match(prompt("b", 4)) == (4, 0)
    assert tree.match(prompt("a", 4)) == (2, 0)  # a's last two blocks went first, its root-side two stay
    tree.insert(prompt("a", 2), 0)  # touching a0, a1 makes b the oldest
    tree.insert(prompt("c", 2), 0)
    assert tree.match(prompt("b", 4)) == (2, 0)
    assert tree.match(prompt("a", 2)) == (2, 0)
    assert tree.match(prompt("z", 2)) == (0, None)


def test_kv_aware_picks_the_longest_cached_prefix_else_replica_0() -> None:
    router = Router("kv_aware", 3)
    # no hit anywhere: the least loaded by the router's count, which keeps none for kv_aware: replica 0
    assert router.pick(prompt("a", 5), None, [2, 0, 1]) == 0
    router._caches[2].add(prompt("c", 5))
    assert router.pick(prompt("c", 3) + prompt("d", 2), None, [0, 0, 9]) == 2  # the longest prefix, whatever load
    assert router.pick(prompt("a", 2) + prompt("b", 3), None, [9, 0, 0]) == 0
    assert router.pick(prompt("e", 4), None, [9, 0, 0]) == 0
    assert router.decisions == [3, 0, 1]


def test_kv_aware_ties_go_to_the_last_and_the_cache_is_bounded() -> None:
    router = Router("kv_aware", 2, cache_blocks=4)
    router.pick(prompt("a", 4), None, [0, 1])  # replica 0
    router.pick(prompt("a", 4), None, [0, 0])  # replica 0 holds all 4
    router._caches[1].add(prompt("a", 4))
    assert router.pick(prompt("a", 4), None, [0, 0]) == 1  # both hold 4: the last (Rust's max_by_key)
    router.pick(prompt("b", 4), None, [0, 1])  # replica 0, which then loses a
    assert router._caches[0].prefix(prompt("a", 4)) == 0


def test_sticky_least_loaded_assigns_new_sessions_by_their_count() -> None:
    router = Router("sticky_least_loaded", 3)
    first = [router.pick(prompt("p", 2), f"s{i}", [9, 0, 0]) for i in range(3)]
    assert sorted(first) == [0, 1, 2]  # one session a replica, whatever the request loads
    again = [router.pick(prompt("q", 2), f"s{i}", [0, 0, 0]) for i in range(3)]
    assert again == first
    fourth = router.pick(prompt("p", 2), "s3", [0, 0, 0])
    fifth = router.pick(prompt("p", 2), "s4", [0, 0, 0])
    assert fourth != fifth
    # without a session: the fewest sessions, not counted
    assert router.pick(prompt("p", 2), None, [0, 0, 0]) == ({0, 1, 2} - {fourth, fifth}).pop()
    assert sorted(router._session_counts) == [1, 2, 2]


def test_power_of_two_compares_loads_only_with_a_load_feed() -> None:
    router = Router("power_of_two", 2, seed=3, load_feed=True)
    assert {router.pick((), None, [5, 1]) for _ in range(20)} == {1}
    three = Router("power_of_two", 3, seed=3, load_feed=True)
    picks = [three.pick((), None, [0, 5, 9]) for _ in range(300)]
    assert picks.count(2) == 0  # the most loaded never wins a pair
    assert picks.count(0) > picks.count(1) > 0  # the least loaded wins every pair it is in (2 of 3)
    # without one (vLLM serves no /get_load and the router counts no load for it): every load is 0, so random
    blind = Router("power_of_two", 2, seed=3)
    assert {blind.pick((), None, [5, 1]) for _ in range(20)} == {0, 1}


def test_seeded_policies_repeat_and_differ_by_seed() -> None:
    def run(policy: str, seed: int) -> list[int]:
        router = Router(policy, 4, seed=seed)
        return [router.pick((), None, [i % 3, 1, 0, 2]) for i in range(40)]

    for policy in ("random", "power_of_two"):
        assert run(policy, 1) == run(policy, 1)
        assert run(policy, 1) != run(policy, 2)


def test_assign_takes_loads_from_the_requests_in_flight() -> None:
    requests = [
        Routed(prompt("a", 4), None, t_ns=0, end_ns=100),
        Routed(prompt("b", 4), None, t_ns=10, end_ns=500),
        Routed(prompt("c", 4), None, t_ns=100, end_ns=200),  # a ended at 100: loads [0, 1]
        Routed(prompt("d", 4), None, t_ns=150, end_ns=300),  # loads [1, 1]: the first
    ]
    assert assign("cache_aware", requests, 2) == [0, 1, 0, 0]
    assert assign("cache_aware", list(reversed(requests)), 2) == [0, 0, 1, 0]  # decided in time order
    assert assign("round_robin", requests, 3) == [0, 1, 2, 0]


def test_assign_keeps_sessions_and_shared_prefixes_together() -> None:
    requests = [
        Routed(prompt(f"s{s}-", 4 + turn * 2), f"s{s}", t_ns=(turn * 3 + s) * 10, end_ns=(turn * 3 + s) * 10 + 5)
        for turn in range(5)
        for s in range(3)
    ]
    for policy in ("consistent_hash", "sticky_least_loaded", "cache_aware", "kv_aware"):
        chosen = assign(policy, requests, 2)
        by_session: dict[str | None, set[int]] = {}
        for request, replica in zip(requests, chosen, strict=True):
            by_session.setdefault(request.session, set()).add(replica)
        assert all(len(replicas) == 1 for replicas in by_session.values()), policy
    spread = assign("round_robin", requests, 2)
    assert {spread[i] for i in range(0, 15, 3)} == {0, 1}  # round robin splits session 0's turns


def test_bad_input_is_one_value_error() -> None:
    with pytest.raises(ValueError, match="no model of policy 'fastest'"):
        Router("fastest", 2)
    with pytest.raises(ValueError, match="at least 1"):
        Router("round_robin", 0)
    with pytest.raises(ValueError, match="3 loads for 2 replicas"):
        Router("round_robin", 2).pick((), None, [0, 0, 0])
    with pytest.raises(ValueError, match="before it starts"):
        assign("random", [Routed((), None, t_ns=10, end_ns=5)], 2)
    assert MODELLED_POLICIES == ROUTER_POLICIES["vllm-router"]
