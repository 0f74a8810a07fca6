"""The prefix-cache hits of a hybrid model whose engine keeps its sliding-window KV only at checkpoints
(docs/scenarios.md, "sessions", "A sliding window kept at checkpoints"), as a pure function of the requests in
send order and the hits their full-attention blocks would give (`metrics.prefix_cache.simulate`).

A hybrid model (Gemma 3: five sliding-window layers to one of full attention) has two groups of KV blocks.
vLLM's hybrid KV cache manager (0.32; `prefix_cache_retention_interval` 0, its default) caches every
full-attention block a request computes, but of its sliding-window blocks only the `need` =
ceil((window - 1) / block_tokens) blocks before each of its checkpoints (Marconi-style retention;
`vllm/v1/core/single_type_kv_cache_manager.py`, `SlidingWindowManager.reachable_block_mask`):

- its replay boundary, (prompt tokens - 1) // block_tokens blocks: where a longer prompt of the same
  conversation resumes;
- its junction, where its full-attention hit ran past its sliding-window hit: the shared prefix it found
  cached but had to compute again (`kv_cache_manager.py`, `get_computed_blocks`' `shared_prefix_boundary`).

A request's hit is where the two groups agree (`SlidingWindowManager.find_longest_cache_hit`): scanning its
blocks down from its full-attention hit, the first run of `need` kept sliding-window blocks ends it; with
none, the run of kept blocks from its first block (shorter than `need`). So the first request to diverge
from a cached prefix at a new point computes the prefix again and marks the junction, and every later one
hits it: with users sharing a system prompt, the second user's first turn misses it, whenever it is sent.

Not modelled: eviction of kept sliding-window blocks (the full-attention hits given may be bounded), a
positive retention interval (periodic checkpoints) and a speculative decoder's extra block. Standard
library only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from loadproof.metrics.prefix_cache import PrefixRequest


def window_blocks(window_tokens: int, block_tokens: int) -> int:
    """The kept sliding-window blocks a hit needs before it: ceil((window - 1) / block_tokens), at least 1."""
    return max(1, -(-(window_tokens - 1) // block_tokens))


def checkpointed_hits(
    requests: Sequence[PrefixRequest], full_hits: Sequence[int], block_tokens: int, window_tokens: int
) -> list[int]:
    """Each request's hit in tokens (requests in send order, as `full_hits`: each one's full-attention hit in
    tokens) where the engine keeps the sliding window's blocks only at checkpoints (the module's docstring)."""
    if block_tokens < 1 or window_tokens < 1:
        raise ValueError("block_tokens and window_tokens must be at least 1")
    need = window_blocks(window_tokens, block_tokens)
    kept: set[Hashable] = set()  # the keys of the sliding-window blocks cached
    hits = []
    for request, full in zip(requests, full_hits, strict=True):
        limit = min(full // block_tokens, len(request.keys))
        hit = _scan(request.keys, limit, kept, need)
        hits.append(hit * block_tokens)
        ends = [min(len(request.keys), max(0, (request.prompt_tokens - 1) // block_tokens))]
        if hit < limit:
            ends.append(limit)  # the junction it computed again
        for end in ends:
            kept.update(request.keys[max(0, end - need) : end])
    return hits


def _scan(keys: Sequence[Hashable], limit: int, kept: set[Hashable], need: int) -> int:
    """The hit in blocks: down from block limit - 1, the first run of `need` kept blocks ends it; without one,
    the run of kept blocks from block 0."""
    run = 0
    for i in range(limit - 1, -1, -1):
        if keys[i] in kept:
            run += 1
            if run >= need:
                return i + run
        else:
            run = 0
    return run


__all__ = ["checkpointed_hits", "window_blocks"]
