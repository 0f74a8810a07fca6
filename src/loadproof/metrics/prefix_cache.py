"""The prefix-cache hits an engine of a given KV cache size would see (docs/scenarios.md, "replay", "The
expectation at the engine's size"), as a pure function of the requests in send order.

The unbounded expectation (`metrics.replay.expected_hits`) assumes a cache that never forgets. An engine's
cache holds `num_blocks` KV blocks of `block_tokens` tokens, and this module replays the requests through
a model of vLLM v1's block pool (`vllm/v1/core/block_pool.py`, `kv_cache_manager.py`, one KV cache group):

- a prompt's full blocks are known by their chained content (`chained_keys`: the segments before a block's
  end and its offset in the last one), as the engine chains its block hashes; its hit is the longest run of
  leading blocks present in the cache, at most (prompt tokens - 1) // block_tokens of them (the last
  prompt token is always computed);
- hit blocks are touched (taken out of the free queue, so they cannot be evicted while the request runs);
  the rest of the request's blocks (its prompt's, and its output's) are taken from the head of the free
  queue, evicting whatever block was cached there: the least recently freed;
- a request's blocks are pinned from its `send_ns` (taken as its scheduling) to its end, then freed in
  reverse order: blocks with a hash (every full block) to the tail of the free queue, the last block
  first, so a request's tail is evicted before its head; the partly filled last block, which has no
  hash, to the head (reused first);
- one block of the pool is the engine's null block and never holds KV: `num_blocks - 1` are usable;
- where the pinned blocks leave too few free, the request gets what there is (the engine would make it
  wait; `Outcome.short_blocks` counts the blocks it could not have).

Not modelled: the prefill's own duration (a request is looked up and takes its blocks at once), preemption, and the
separate block groups of a hybrid (sliding-window) model; an engine run with one KV cache group
(a model without sliding windows, or vLLM's `--disable-hybrid-kv-cache-manager`) is what this predicts.

For other scenarios (sessions): build each request's `PrefixRequest` with `chained_keys` from the
segments its prompt is made of (a shared system prompt, each message, each reply, each with an id that
names its content and its length) and call `simulate(requests, num_blocks, block_tokens)`; its
`hits[i]` are request i's hit tokens (requests in the order given; events are ordered by their times).

What the engine itself reported, to set beside the expectation: `reported_hit_pct`.
Standard library only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from loadproof.metrics.intervals import Interval
from loadproof.metrics.uncertainty import ratio_interval
from loadproof.records import RequestRecord


@dataclass(frozen=True)
class PrefixRequest:
    """One request as the cache sees it: when the engine took it up (`send_ns`: its send, or, where requests
    queue, better its first token's time: the engine looks a request up when it schedules it) and when it
    ended (ns on the run's clock), the key of each full block of its prompt (`chained_keys`), its prompt's
    tokens and its output's tokens."""

    send_ns: int
    end_ns: int
    keys: Sequence[Hashable]
    prompt_tokens: int
    output_tokens: int = 0


@dataclass
class Outcome:
    """Per request (in the order given): its hit in tokens. And the blocks no request could have (the pool
    pinned whole) and the blocks evicted while cached."""

    hits: list[int]
    short_blocks: int = 0
    evictions: int = 0


def chained_keys(segments: Sequence[tuple[Hashable, int]], block_tokens: int) -> list[Hashable]:
    """The key of each full block of a prompt made of `segments` ((id, tokens) one after another): the ids
    of the segments that begin before the block's end and the block's end offset in the last of them. Two
    prompts share a block's key exactly when their segments agree up to its end (an id names a segment's
    content; a shorter segment of the same id is taken as a prefix of the longer)."""
    keys: list[Hashable] = []
    ids: list[Hashable] = []
    start = 0  # where the current segment begins
    end = block_tokens
    for seg_id, tokens in segments:
        if tokens <= 0:
            continue
        ids.append(seg_id)
        while end <= start + tokens:
            keys.append((tuple(ids), end - start))
            end += block_tokens
        start += tokens
    return keys


def mooncake_segments(
    text_tokens: int, hash_ids: Sequence[Hashable], trace_block_tokens: int, lead_tokens: int = 0
) -> list[tuple[Hashable, int]]:
    """A replayed Mooncake prompt as segments: the engine's leading overhead (`lead_tokens`, the same for
    every prompt), then one segment per hash id, `trace_block_tokens` each, the last cut to what remains of
    `text_tokens`."""
    segments: list[tuple[Hashable, int]] = [(("lead",), lead_tokens)] if lead_tokens > 0 else []
    left = text_tokens
    for h in hash_ids:
        if left <= 0:
            break
        segments.append((h, min(trace_block_tokens, left)))
        left -= trace_block_tokens
    return segments


@dataclass
class _Pool:
    usable: int
    free: OrderedDict[int, Hashable | None] = field(default_factory=OrderedDict)  # slot -> key, head first
    cached: dict[Hashable, int] = field(default_factory=dict)  # key -> slot
    key_of: dict[int, Hashable | None] = field(default_factory=dict)
    refs: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for slot in range(self.usable):
            self.free[slot] = None
            self.key_of[slot] = None
            self.refs[slot] = 0

    def touch(self, slot: int) -> None:
        if self.refs[slot] == 0:
            del self.free[slot]
        self.refs[slot] += 1

    def take(self) -> tuple[int | None, bool]:
        """A slot from the free queue's head (None: none free), and whether a cached block was evicted."""
        if not self.free:
            return None, False
        slot, key = self.free.popitem(last=False)
        evicted = key is not None and self.cached.get(key) == slot
        if evicted:
            del self.cached[key]
        self.key_of[slot] = None
        self.refs[slot] = 1
        return slot, evicted

    def name(self, slot: int, key: Hashable) -> None:
        """Cache the block in `slot` under `key`, unless another block already holds that content."""
        if key not in self.cached:
            self.cached[key] = slot
            self.key_of[slot] = key

    def release(self, slots: list[int]) -> None:
        """Free a request's blocks in reverse order: hashed ones to the tail, unhashed ones to the head."""
        first: list[int] = []
        for slot in reversed(slots):
            self.refs[slot] -= 1
            if self.refs[slot] > 0:
                continue
            key = self.key_of[slot]
            if key is None:
                first.append(slot)
            else:
                self.free[slot] = key
        for slot in reversed(first):  # prepended in order: the first of them ends up at the head
            self.free[slot] = None
            self.free.move_to_end(slot, last=False)


def simulate(requests: Sequence[PrefixRequest], num_blocks: int | None, block_tokens: int) -> Outcome:
    """Each request's prefix-cache hit in tokens, requests in send order, on a pool of `num_blocks` blocks
    of `block_tokens` tokens (None: unbounded, nothing ever evicted). See the module's docstring."""
    if block_tokens < 1:
        raise ValueError("block_tokens must be at least 1")
    total_blocks = sum(_blocks_of(r, block_tokens) for r in requests)
    pool = _Pool(total_blocks + 1 if num_blocks is None else max(0, num_blocks - 1))
    outcome = Outcome(hits=[0] * len(requests))
    # events: (time, 0 = end before 1 = send at the same time, index)
    events = sorted(
        [(r.send_ns, 1, i) for i, r in enumerate(requests)]
        + [(max(r.end_ns, r.send_ns), 0, i) for i, r in enumerate(requests)]
    )
    held: dict[int, list[int]] = {}
    for _, kind, i in events:
        r = requests[i]
        if kind == 0:
            pool.release(held.pop(i, []))
            continue
        slots: list[int] = []
        limit = max(0, (r.prompt_tokens - 1) // block_tokens)
        hit = 0
        while hit < min(limit, len(r.keys)) and r.keys[hit] in pool.cached:
            slot = pool.cached[r.keys[hit]]
            pool.touch(slot)
            slots.append(slot)
            hit += 1
        outcome.hits[i] = hit * block_tokens
        full_prompt = min(len(r.keys), r.prompt_tokens // block_tokens)
        need = _blocks_of(r, block_tokens) - hit
        for j in range(hit, hit + need):
            taken, evicted = pool.take()
            outcome.evictions += evicted
            if taken is None:
                outcome.short_blocks += hit + need - j
                break
            slots.append(taken)
            if j < full_prompt:
                pool.name(taken, r.keys[j])
            elif (j + 1) * block_tokens <= r.prompt_tokens + r.output_tokens:
                pool.name(taken, ("output", i, j))  # a full block of its own output: hashed, never shared
        held[i] = slots
    return outcome


def _blocks_of(r: PrefixRequest, block_tokens: int) -> int:
    return -(-(r.prompt_tokens + r.output_tokens) // block_tokens)


def working_set_tokens(requests: Sequence[PrefixRequest], block_tokens: int) -> int:
    """Distinct prompt blocks over all the requests x block_tokens: what an unbounded cache would end up
    holding (compare it with the engine's cache: larger, and eviction must cost hits)."""
    return len({k for r in requests for k in r.keys}) * block_tokens


def reported_hit_pct(records: list[RequestRecord]) -> float | None:
    """The engine's per-request prefix-cache hits (usage.prompt_tokens_details.cached_tokens, which vLLM
    reports with --enable-prompt-tokens-details) over the prompt tokens of the requests reporting them, %."""
    rows = [(r.cached_tokens, r.prompt_tokens) for r in records if r.cached_tokens is not None and r.prompt_tokens]
    if not rows:
        return None
    return 100 * sum(cached for cached, _ in rows) / sum(prompt for _, prompt in rows)


def reported_hit_interval(records: list[RequestRecord]) -> Interval | None:
    """`reported_hit_pct`'s interval: a share of tokens, not of independent trials (a request's cached tokens
    come in whole blocks, all or none of a shared prefix), so batch means of its linearized per-request values
    over the requests in send order (metrics/uncertainty.py, `ratio_interval`), in percent."""
    rows = sorted(
        (r for r in records if r.cached_tokens is not None and r.prompt_tokens), key=lambda r: (r.send_ns, r.end_ns)
    )
    return ratio_interval(
        [float(r.cached_tokens or 0) for r in rows], [float(r.prompt_tokens or 0) for r in rows], 100.0, 100.0
    )
