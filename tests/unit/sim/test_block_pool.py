"""The block pool is made lazily (a block has no object until first allocated); it must hand out, evict and
count blocks exactly as the eager pool it replaced, whose free queue held every id 0..N-1 from the start."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from loadproof.sim.blocks import BlockPool


class EagerPool:
    """The pool as it was: every block made at the start, the free queue every id in order."""

    def __init__(self, num_blocks: int) -> None:
        self.ref = [0] * num_blocks
        self.hash: list[int | None] = [None] * num_blocks
        self.free_q: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.cached: dict[int, int] = {}

    def allocate(self, count: int) -> list[int] | None:
        if count > len(self.free_q):
            return None
        out = []
        for _ in range(count):
            block_id, _ = self.free_q.popitem(last=False)
            h = self.hash[block_id]
            if h is not None:
                if self.cached.get(h) == block_id:
                    del self.cached[h]
                self.hash[block_id] = None
            self.ref[block_id] = 1
            out.append(block_id)
        return out

    def cache(self, block_id: int, h: int) -> None:
        if h not in self.cached:
            self.hash[block_id] = h
            self.cached[h] = block_id

    def touch(self, ids: list[int]) -> None:
        for block_id in ids:
            if self.ref[block_id] == 0:
                del self.free_q[block_id]
            self.ref[block_id] += 1

    def free(self, ids: list[int]) -> None:
        for block_id in reversed(ids):
            self.ref[block_id] -= 1
            if self.ref[block_id] == 0:
                self.free_q[block_id] = None


ops = st.lists(st.tuples(st.sampled_from(["alloc", "free", "hit"]), st.integers(1, 6), st.integers(0, 5)), max_size=60)


@settings(max_examples=200)
@given(n=st.integers(1, 24), script=ops)
def test_the_lazy_pool_allocates_evicts_and_counts_as_the_eager_one(n, script):
    lazy, eager = BlockPool(n, 16), EagerPool(n)
    held: list[list[int]] = []  # each live allocation's blocks (a request's)
    for op, count, h in script:
        if op == "alloc":
            got = lazy.allocate(count)
            assert got == eager.allocate(count)
            if got:
                lazy.cache(got[0], h)  # its first block's content, as a prompt's first hash
                eager.cache(got[0], h)
                held.append(got)
        elif op == "free" and held:
            ids = held.pop(count % len(held))
            lazy.free(ids)
            eager.free(ids)
        elif op == "hit":
            hit = lazy.cached_prefix([h])
            assert hit == ([eager.cached[h]] if h in eager.cached else [])
            if hit:
                lazy.touch(hit)
                eager.touch(hit)
                held.append(hit)
        assert lazy.num_free == len(eager.free_q)
        assert lazy.usage == 1.0 - len(eager.free_q) / n
