"""A Mooncake-format trace that outgrows a small KV cache, and what a replay of it must show: six prompts of
four shared blocks and one block of their own, visited in turn three times. A cache that kept everything would
serve each prompt's four shared blocks from the second round on (53% of the prompt tokens); an LRU cache of
about three requests' worth has evicted each prompt's blocks by the time it comes back, so the engine hits
nothing, and replay's expectation at the engine's size (read from its /metrics) says so. Shared by the
embedded engine's test (test_replay_small_kv.py) and the simulator's (test_sim_cache_config.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PREFIXES, ROUNDS = 6, 3


def write_cyclic_trace(path: Path, gap_ms: int) -> Path:
    """Request i: prefix i % 6 (hash ids 100k..100k+3) and a block of its own, `gap_ms` apart in the trace."""
    rows = []
    for i in range(PREFIXES * ROUNDS):
        ids = [100 * (i % PREFIXES) + j for j in range(4)] + [10_000 + i]
        rows.append({"timestamp": gap_ms * i, "input_length": 512 * len(ids), "output_length": 2, "hash_ids": ids})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def assert_read_against_bounded(claims: dict[str, Any], run_dir: Path, blocks: int, block_tokens: int) -> None:
    """The replay read the engine's cache (`blocks` of `block_tokens`) from its /metrics, expected it to evict
    everything, and the engine's hits are the bounded expectation's, not the unbounded one's."""
    value = {name: c["value"] for name, c in claims.items()}
    plan = json.loads((run_dir / "manifest.json").read_text())["plan"]
    assert (plan["kv_blocks"], plan["kv_block_tokens"], plan["kv_source"]) == (blocks, block_tokens, "metrics")
    assert value["replay.requests"] == PREFIXES * ROUNDS and value["replay.failed_requests"] == 0
    assert value["replay.prefix_hit_rate.read_against"] == "bounded"
    unbounded, bounded = value["replay.prefix_hit_rate.expected_pct"], value["replay.prefix_hit_rate.bounded_pct"]
    assert unbounded > 45 and bounded < 5, value  # 12 of 18 requests would hit 4 of 5 blocks; LRU: none
    engine = value["replay.prefix_hit_rate.engine_pct"]
    assert abs(engine - bounded) < 5 and abs(engine - bounded) < abs(engine - unbounded), value
