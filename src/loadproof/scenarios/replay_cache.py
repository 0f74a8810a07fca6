"""The engine's KV cache size as `run replay` reads it, for the prefix-cache expectation at that size
(`metrics.prefix_cache`): `--kv-blocks N --kv-block-tokens B`, else its /metrics `cache_config_info`."""

from __future__ import annotations

from dataclasses import dataclass

from loadproof.telemetry.cache_config import read_cache_config
from loadproof.telemetry.server_metrics import MetricsSource


@dataclass(frozen=True)
class CacheSize:
    """The engine's KV cache: blocks in its pool, tokens a block, and where that was read."""

    blocks: int
    block_tokens: int
    source: str


def engine_cache(source: MetricsSource, api_key: str | None) -> CacheSize | None:
    """The engine's pool from its /metrics cache_config_info (telemetry.cache_config: num_gpu_blocks and
    block_size), or None where it does not say."""
    found = read_cache_config(source, api_key)
    if found is None or found.num_blocks is None:
        return None
    return CacheSize(found.num_blocks, found.block_tokens, "metrics")
