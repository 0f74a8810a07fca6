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
    num_blocks: int
    block_size: int
    enable_prefix_caching: bool = True
    blocks: list[Block] = field(init=False)
    _free: OrderedDict[int, None] = field(init=False)  # insertion order = eviction order
    _cached: dict[int, int] = field(init=False)  # block hash -> block id

    def __post_init__(self) -> None:
        self.blocks = [Block(i) for i in range(self.num_blocks)]
        self._free = OrderedDict((i, None) for i in range(self.num_blocks))
        self._cached = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

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
        if count > len(self._free):
            return None
        out = []
        for _ in range(count):
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
