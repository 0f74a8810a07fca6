"""Routers that front a fleet of engine replicas (issue #40): which routers loadproof launches, the policies each
one has, and a model of how each of vllm-router's policies assigns requests to replicas (`Router`, `assign`), shared
by the fleet's expected prefix hits (`metrics`) and the simulator's fleet (`sim`). Standard library only.

| router | package | policies |
|---|---|---|
| `vllm-router` | vllm-router (PyPI, Apache-2.0) | random, round_robin, cache_aware, kv_aware, power_of_two, consistent_hash, sticky_least_loaded |
| `sglang-router` | sglang-router (PyPI, Apache-2.0) | random, round_robin, cache_aware, power_of_two |

vllm-router's `consistent_hash` keys a request by the first of these headers it carries: X-Session-ID,
X-User-ID, X-Tenant-ID, X-Request-ID, X-Correlation-ID, X-Trace-ID (then body fields, then the body's hash);
it has no flag to name another. Its `cache_aware` renders each prompt on a replica
(`POST /v1/chat/completions/render`), which vLLM serves only when started with `--enable-scale-out`.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import random
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

ROUTER_POLICIES: dict[str, tuple[str, ...]] = {
    "vllm-router": (
        "random",
        "round_robin",
        "cache_aware",
        "kv_aware",
        "power_of_two",
        "consistent_hash",
        "sticky_least_loaded",
    ),
    "sglang-router": ("random", "round_robin", "cache_aware", "power_of_two"),
}
ROUTERS: tuple[str, ...] = tuple(ROUTER_POLICIES)
# the headers vllm-router's consistent_hash reads, in its order (lower case: HTTP header names are not case-sensitive)
SESSION_HEADERS: tuple[str, ...] = (
    "x-session-id",
    "x-user-id",
    "x-tenant-id",
    "x-request-id",
    "x-correlation-id",
    "x-trace-id",
)


def check_policy(router: str, policy: str) -> None:
    """ValueError naming the router's policies where `policy` is not one of them (or `router` is unknown)."""
    if router not in ROUTER_POLICIES:
        raise ValueError(f"router {router!r} is not one loadproof launches ({', '.join(ROUTERS)})")
    if policy not in ROUTER_POLICIES[router]:
        raise ValueError(f"{router} has no policy {policy!r} (its policies: {', '.join(ROUTER_POLICIES[router])})")


# ---- a model of each policy, at block granularity ----------------------------------------------------------------
#
# Read from vllm-router's source (github.com/vllm-project/router, src/policies/*.rs, src/tree.rs, and its CLI
# defaults in vllm-router 0.1.17): every decision below names the Rust it follows. A request is its prompt's KV
# block ids in order (what a prefix match walks), the session header it carries, and the replicas' loads when it
# reaches the router (requests sent to each and not yet ended: the router's own in-flight counter).

MODELLED_POLICIES: tuple[str, ...] = ROUTER_POLICIES["vllm-router"]
# the policies whose requests vllm-router counts in flight per worker (router.rs increments a worker's load for
# cache_aware alone); the others see every worker at load 0
TRACKS_LOAD = frozenset({"cache_aware"})
VIRTUAL_NODES_PER_REPLICA = 160  # consistent_hash.rs VIRTUAL_NODES_PER_WORKER


@dataclass(frozen=True)
class Routed:
    """One request as the router sees it."""

    blocks: tuple[Hashable, ...]  # its prompt's KV block ids, in order
    session: str | None  # the value of the first SESSION_HEADERS header it carries, or None
    t_ns: int  # when it reaches the router
    end_ns: int  # when it ended


def stable_hash(key: object) -> int:
    """A 64-bit hash of `repr(key)` that is the same in every process (Python's `hash` of a str is salted)."""
    return int.from_bytes(hashlib.blake2b(repr(key).encode(), digest_size=8).digest(), "big")


def least_loaded(loads: Sequence[int]) -> int:
    """The first replica of the smallest load (Rust's `min_by_key` keeps the first minimum)."""
    return min(range(len(loads)), key=loads.__getitem__)


class _Node:
    __slots__ = ("block", "children", "parent", "tenants")

    def __init__(self, block: Hashable, parent: _Node | None) -> None:
        self.block = block
        self.parent = parent
        self.children: dict[Hashable, _Node] = {}
        self.tenants: dict[int, None] = {}  # replicas holding this node, in the order they reached it


class PrefixTree:
    """cache_aware's approximate tree (tree.rs), one node a block: one tree shared by the replicas, each node
    marked with the replicas whose requests passed through it. A match walks the longest path of the request's
    blocks and names the replica that first reached its deepest node (tree.rs caches that one as `last_tenant`
    and keeps it while it holds the node). With `cache_blocks`, each replica holds at most that many nodes and
    loses its least recently inserted leaves first (tree.rs `evict_tenant_by_size`, which vllm-router runs every
    `--eviction-interval-secs` against `--max-tree-size` characters; here at once, in blocks)."""

    def __init__(self, replicas: int, cache_blocks: int | None) -> None:
        self.root = _Node(None, None)
        self.cache_blocks = cache_blocks
        # per replica, its nodes from least to most recently inserted; a node is always inserted after its
        # children (see `insert`), so the oldest is a leaf for that replica
        self.recency: list[OrderedDict[_Node, None]] = [OrderedDict() for _ in range(replicas)]

    def match(self, blocks: Sequence[Hashable]) -> tuple[int, int | None]:
        """(blocks matched, the replica holding the deepest matched node, or None when nothing matched)."""
        node, matched = self.root, 0
        for block in blocks:
            child = node.children.get(block)
            if child is None:
                break
            node, matched = child, matched + 1
        return matched, next(iter(node.tenants), None) if matched else None

    def insert(self, blocks: Sequence[Hashable], replica: int) -> None:
        path: list[_Node] = []
        node = self.root
        for block in blocks:
            child = node.children.get(block)
            if child is None:
                child = node.children[block] = _Node(block, node)
            child.tenants.setdefault(replica, None)
            path.append(child)
            node = child
        recency = self.recency[replica]
        for node in reversed(path):  # the leaf first: a parent is always more recent than its children
            recency[node] = None
            recency.move_to_end(node)
        while self.cache_blocks is not None and len(recency) > self.cache_blocks:
            self._evict(recency.popitem(last=False)[0], replica)

    def size(self, replica: int) -> int:
        return len(self.recency[replica])

    @staticmethod
    def _evict(node: _Node, replica: int) -> None:
        del node.tenants[replica]
        if not node.tenants and not node.children and node.parent is not None:
            del node.parent.children[node.block]


class BlockCache:
    """One replica's KV cache as kv_aware sees it through the engine's KV events: the blocks it holds, least
    recently used first, bounded by `cache_blocks` (None: never evicted)."""

    def __init__(self, cache_blocks: int | None) -> None:
        self.cache_blocks = cache_blocks
        self.blocks: OrderedDict[Hashable, None] = OrderedDict()

    def prefix(self, blocks: Sequence[Hashable]) -> int:
        """How many of the leading blocks it holds, contiguously (kv_index PrefixScorer)."""
        held = 0
        for block in blocks:
            if block not in self.blocks:
                break
            held += 1
        return held

    def add(self, blocks: Sequence[Hashable]) -> None:
        for block in reversed(blocks):  # the first block last: it is the one most requests share
            self.blocks[block] = None
            self.blocks.move_to_end(block)
        while self.cache_blocks is not None and len(self.blocks) > self.cache_blocks:
            self.blocks.popitem(last=False)


class Router:
    """A model of one vllm-router policy deciding one request at a time.

    - `round_robin`: replica `n mod N` for the n-th request (round_robin.rs).
    - `random`: uniform, from `random.Random(seed)`.
    - `power_of_two`: two distinct replicas at random, the less loaded (the first on a tie; power_of_two.rs).
      Its loads are what it polls from each worker's `/get_load` plus the router's in-flight counter, which
      vllm-router keeps for cache_aware alone (`TRACKS_LOAD`). vLLM serves no `/get_load`, so against vLLM
      workers every load is 0 and it is random; with `load_feed` (workers that answer `/get_load`, SGLang's)
      it compares the loads given.
    - `consistent_hash`: a ring of 160 virtual nodes a replica; the key is the session header's value, else the
      body's hash (a request's blocks here). The real hash (mcrouter's furc + murmur) differs, so the model does
      not predict which replica a session lands on, only that each session (each distinct body) keeps one.
    - `sticky_least_loaded`: a new session goes to the replica holding the fewest sessions (ties by a
      rendezvous hash of the session), and stays there; sessions are never released (vllm-router's 2 h idle
      TTL and `finish_session` are not modelled). A request without a session goes to the replica with the
      fewest sessions too, without being counted. Its load is sessions, not the `loads` given.
    - `cache_aware` (cache_aware.rs): if the loads are imbalanced (max - min > `balance_abs_threshold` and
      max > min * `balance_rel_threshold`), the least loaded; else the prefix tree's match rate (matched blocks
      / blocks) above `cache_threshold` picks the replica of the longest match, and below it the least loaded
      (the published source's comment says "smallest tree"; its code and 0.1.17 pick the least loaded). Either
      way the request's blocks join the chosen replica's tree. The real tree matches characters of the request
      text; blocks here, so a prompt shorter than one block never matches.
    - `kv_aware` (kv_aware.rs): the replica whose cache holds the longest prefix of the request's blocks (the
      last on a tie, as Rust's `max_by_key`), else the least loaded, which is replica 0, as the router counts no
      load for it (`TRACKS_LOAD`); each replica's cache is what it was sent,
      LRU-bounded by `cache_blocks`. vllm-router 0.1.17 scores a token cost with a softmax temperature and
      per-tier credits over the engines' real KV events; the model keeps the longest cached prefix only.
    """

    def __init__(
        self,
        policy: str,
        replicas: int,
        *,
        seed: int = 0,
        cache_threshold: float = 0.3,
        balance_abs_threshold: int = 64,
        balance_rel_threshold: float = 1.5,
        cache_blocks: int | None = None,
        load_feed: bool = False,
    ) -> None:
        if policy not in MODELLED_POLICIES:
            raise ValueError(f"no model of policy {policy!r} (modelled: {', '.join(MODELLED_POLICIES)})")
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {replicas}")
        if not 0.0 <= cache_threshold <= 1.0:
            raise ValueError(f"cache_threshold must be within 0..1, not {cache_threshold}")
        if cache_blocks is not None and cache_blocks < 1:
            raise ValueError(f"cache_blocks must be at least 1, not {cache_blocks}")
        self.policy = policy
        self.replicas = replicas
        self.sees_load = policy in TRACKS_LOAD or (load_feed and policy == "power_of_two")
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.decisions = [0] * replicas  # requests sent to each replica (vllm_router_processed_requests_total)
        self._rng = random.Random(seed)
        self._next = 0
        self._tree = PrefixTree(replicas, cache_blocks)
        self._caches = [BlockCache(cache_blocks) for _ in range(replicas)]
        self._ring = sorted(
            (stable_hash(f"replica-{r}:{v}"), r) for r in range(replicas) for v in range(VIRTUAL_NODES_PER_REPLICA)
        )
        self._sessions: dict[str, int] = {}
        self._session_counts = [0] * replicas
        self._pick = {
            "round_robin": self._round_robin,
            "random": self._random,
            "power_of_two": self._power_of_two,
            "consistent_hash": self._consistent_hash,
            "sticky_least_loaded": self._sticky_least_loaded,
            "cache_aware": self._cache_aware,
            "kv_aware": self._kv_aware,
        }[policy]

    def pick(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        """The replica this request goes to, given each replica's load now (its requests sent and not yet ended,
        which only the policies that see a load read); updates the policy's state."""
        if len(loads) != self.replicas:
            raise ValueError(f"{len(loads)} loads for {self.replicas} replicas")
        replica = self._pick(blocks, session or None, loads if self.sees_load else [0] * self.replicas)
        self.decisions[replica] += 1
        return replica

    def _round_robin(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        self._next += 1
        return (self._next - 1) % self.replicas

    def _random(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        return self._rng.randrange(self.replicas)

    def _power_of_two(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        if self.replicas == 1:
            return 0
        first = self._rng.randrange(self.replicas)
        second = self._rng.randrange(self.replicas - 1)
        second += second >= first  # a second replica, uniform among the others
        return first if loads[first] <= loads[second] else second

    def _consistent_hash(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        key = stable_hash(f"header:{SESSION_HEADERS[0]}:{session}" if session else ("request", tuple(blocks)))
        at = bisect.bisect_left(self._ring, (key, -1))
        return self._ring[at % len(self._ring)][1]

    def _sticky_least_loaded(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        if session in self._sessions:
            return self._sessions[session]
        fewest = min(self._session_counts)
        tie_key = session if session else repr(tuple(blocks))
        replica = max(
            (r for r in range(self.replicas) if self._session_counts[r] == fewest),
            key=lambda r: stable_hash(f"{tie_key}:{r}"),
        )
        if session:
            self._sessions[session] = replica
            self._session_counts[replica] += 1
        return replica

    def _cache_aware(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        low, high = min(loads), max(loads)
        imbalanced = high - low > self.balance_abs_threshold and high > low * self.balance_rel_threshold
        replica = least_loaded(loads)
        if not imbalanced and blocks:
            matched, holder = self._tree.match(blocks)
            if holder is not None and matched / len(blocks) > self.cache_threshold:
                replica = holder
        self._tree.insert(blocks, replica)
        return replica

    def _kv_aware(self, blocks: Sequence[Hashable], session: str | None, loads: Sequence[int]) -> int:
        scores = [cache.prefix(blocks) for cache in self._caches]
        best = max(scores)
        replica = max(r for r in range(self.replicas) if scores[r] == best) if best else least_loaded(loads)
        self._caches[replica].add(blocks)
        return replica


def assign(policy: str, requests: Sequence[Routed], replicas: int, **router_kwargs: Any) -> list[int]:
    """Each request's replica under `policy`, deciding them in arrival order (ties in input order) with each
    replica's load at that moment: its requests sent and not yet ended (one ending at `t` has ended)."""
    router = Router(policy, replicas, **router_kwargs)
    order = sorted(range(len(requests)), key=lambda i: requests[i].t_ns)
    loads = [0] * replicas
    running: list[tuple[int, int]] = []  # (end_ns, replica), a heap
    chosen = [0] * len(requests)
    for i in order:
        request = requests[i]
        if request.end_ns < request.t_ns:
            raise ValueError(f"request {i} ends at {request.end_ns} ns, before it starts at {request.t_ns} ns")
        while running and running[0][0] <= request.t_ns:
            loads[heapq.heappop(running)[1]] -= 1
        replica = chosen[i] = router.pick(request.blocks, request.session, loads)
        loads[replica] += 1
        heapq.heappush(running, (request.end_ns, replica))
    return chosen
