"""A tiny Mooncake trace replayed on the real embedded engine: the engine's own prefix-cache hit rate
(its prefix_cache_hits / prefix_cache_queries growth) tracks the one the trace's shared blocks promise.

The engine's KV blocks are 128 tokens, so the trace's blocks are scaled to 128 (`--block-tokens 128`),
and requests are spaced so that each one's shared blocks are cached before it arrives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_long_context import run

pytestmark = [pytest.mark.engine, pytest.mark.timeout(120)]

# hash ids per request (512-token blocks in the trace, 128 tokens here); expected hits in blocks of 128:
# 0, 2, 3, 0, 2, 1, 3, 0, 3, 4 -> 2,304 of 4,096 text tokens (+ 1 BOS each)
BLOCKS = [[0, 1, 2], [0, 1, 3], [0, 1, 2, 4], [5, 6], [5, 6, 7], [0, 8], [5, 6, 7, 9], [10, 11, 12], [10, 11, 12],
          [0, 1, 2, 4, 13]]


def test_the_engines_prefix_hit_rate_tracks_the_traces(engine, tmp_path: Path):
    trace = tmp_path / "tiny.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 600 * i, "input_length": 512 * len(ids), "output_length": 2,
                                         "hash_ids": ids}) + "\n" for i, ids in enumerate(BLOCKS)))
    result, claims, _ = run("replay", engine, tmp_path, "--trace", str(trace), "--block-tokens", "128")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    value = {name: c["value"] for name, c in claims.items()}
    assert value["replay.requests"] == 10 and value["replay.failed_requests"] == 0
    assert value["replay.input_tokens_mismatched"] == 0
    assert value["replay.prefix_hit_rate.expected_pct"] == pytest.approx(100 * 2304 / 4106, abs=0.01)
    assert value["replay.engine_prefix_cache_queries"] >= 4106
    assert abs(value["replay.prefix_hit_rate.engine_pct"] - value["replay.prefix_hit_rate.expected_pct"]) < 5, value
