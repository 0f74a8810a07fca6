"""Paged KV blocks with prefix caching by block hash, as vLLM's v1 block pool keeps them.

A request's prompt is a chain of full-block hashes (each hash covers its block and every block before
it, and the salt is folded into the first, so a different salt changes every hash). Freed blocks go
to the tail of the free queue still holding their hash: they count as free (KV usage excludes them)
and a later prompt with the same prefix can reuse them until they are evicted by an allocation.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    block_hash: int | None = None


@dataclass
class BlockPool:
    """The pool, made lazily: a block never allocated has no object yet. The free queue is the never-used
    ids `[_fresh, num_blocks)` in order, then the freed ones in the order they were freed (`_free`), which is
    the order a queue of every id 0..N-1 at the start would give (a fresh block holds no hash, so nothing
    takes one out of the middle); a pool of a million blocks costs nothing until it fills."""

    num_blocks: int
    block_size: int
    enable_prefix_caching: bool = True
    blocks: list[Block] = field(init=False)  # blocks[i] for every id allocated at least once (ids < _fresh)
    _fresh: int = field(init=False)  # the next never-used block id
    _free: OrderedDict[int, None] = field(init=False)  # freed blocks; insertion order = eviction order
    _cached: dict[int, int] = field(init=False)  # block hash -> block id

    def __post_init__(self) -> None:
        self.blocks = []
        self._fresh = 0
        self._free = OrderedDict()
        self._cached = {}

    @property
    def num_free(self) -> int:
        return self.num_blocks - self._fresh + len(self._free)

    @property
    def usage(self) -> float:
        """vLLM's kv_cache_usage_perc: the fraction of blocks held by requests (cached free blocks are free)."""
        return 1.0 - self.num_free / self.num_blocks

    def cached_prefix(self, hashes: list[int]) -> list[int]:
        """Block ids of the longest cached prefix of `hashes`."""
        if not self.enable_prefix_caching:
            return []
        out = []
        for h in hashes:
            block_id = self._cached.get(h)
            if block_id is None:
                break
            out.append(block_id)
        return out

    def touch(self, block_ids: list[int]) -> None:
        """Take a reference on cached blocks (a prefix-cache hit); free ones leave the free queue."""
        for block_id in block_ids:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self._free[block_id]
            block.ref_count += 1

    def allocate(self, count: int) -> list[int] | None:
        if count > self.num_free:
            return None
        out = []
        for _ in range(count):
            if self._fresh < self.num_blocks:  # the head of the queue: blocks never used, in id order
                block = Block(self._fresh, ref_count=1)
                self.blocks.append(block)
                self._fresh += 1
                out.append(block.block_id)
                continue
            block_id, _ = self._free.popitem(last=False)
            block = self.blocks[block_id]
            if block.block_hash is not None:  # evict: its cached content is overwritten
                if self._cached.get(block.block_hash) == block_id:
                    del self._cached[block.block_hash]
                block.block_hash = None
            block.ref_count = 1
            out.append(block_id)
        return out

    def cache(self, block_id: int, block_hash: int) -> None:
        if self.enable_prefix_caching and block_hash not in self._cached:
            self.blocks[block_id].block_hash = block_hash
            self._cached[block_hash] = block_id

    def free(self, block_ids: list[int]) -> None:
        # Reverse order, as vLLM does, so a request's tail blocks are evicted before its head.
        for block_id in reversed(block_ids):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._free[block_id] = None


@dataclass
class CpuTier:
    """A CPU tier of `num_blocks` blocks beside the GPU's pool, as vLLM's native offloading keeps one: each
    block the GPU computes is stored there too (by its hash), the least recently used evicted; a prompt whose
    GPU prefix hit stops short continues its hit here, block by block, and those blocks are loaded back."""

    num_blocks: int
    _hashes: OrderedDict[int, None] = field(init=False)  # least recently used first

    def __post_init__(self) -> None:
        self._hashes = OrderedDict()

    def store(self, block_hash: int) -> None:
        if self.num_blocks <= 0:
            return
        self._hashes[block_hash] = None
        self._hashes.move_to_end(block_hash)
        while len(self._hashes) > self.num_blocks:
            self._hashes.popitem(last=False)

    def continued_hit(self, hashes: list[int]) -> int:
        """How many of `hashes`, from the first, the tier holds (each hit becomes the most recently used)."""
        n = 0
        for h in hashes:
            if h not in self._hashes:
                break
            self._hashes.move_to_end(h)
            n += 1
        return n
