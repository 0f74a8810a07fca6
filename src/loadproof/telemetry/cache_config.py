"""The engine's KV cache as its /metrics describes it: vLLM's `cache_config_info` gauge, whose labels carry
the block size (`block_size`), the blocks in the pool (`num_gpu_blocks`) and, in newer vLLM, the cache's
size in tokens (`kv_cache_size_tokens`, its own count where a hybrid model's blocks serve several layer
groups) and how it keeps a hybrid model's sliding-window blocks (`prefix_cache_retention_interval`). One reader for every scenario that sizes a prefix-cache expectation by the engine (replay,
sessions); a Prometheus server's query API is not asked (its series are summed by name, the labels lost).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from loadproof.telemetry.server_metrics import MetricsSource

INFO_SUFFIXES = ("cache_config_info", "cache_config")  # the parser may name an info gauge's sample either way


@dataclass(frozen=True)
class CacheConfig:
    """Tokens a block, blocks in the pool (None where not a whole number), the engine's own token count, and
    `prefix_cache_retention_interval` (vLLM 0.32: 0 keeps a hybrid model's sliding-window blocks only at
    checkpoints; None where the engine does not say or keeps them all)."""

    block_tokens: int
    num_blocks: int | None
    kv_tokens: int | None = None
    retention_interval: int | None = None

    @property
    def tokens(self) -> int | None:
        """The cache in tokens: the engine's own count, else blocks x block size."""
        if self.kv_tokens is not None:
            return self.kv_tokens
        return self.num_blocks * self.block_tokens if self.num_blocks is not None else None


def _whole(labels: dict[str, str], name: str) -> int | None:
    value = labels.get(name, "")
    return int(value) if value.isdigit() else None


def cache_config(text: str) -> CacheConfig | None:
    """The first cache_config_info series of an exposition with a block size and a size (blocks or tokens)."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return None
    for family in families:
        for sample in family.samples:
            if not sample.name.endswith(INFO_SUFFIXES):
                continue
            block, blocks = _whole(sample.labels, "block_size"), _whole(sample.labels, "num_gpu_blocks")
            tokens = _whole(sample.labels, "kv_cache_size_tokens")
            if blocks is not None and blocks < 2:
                blocks = None  # one block is vLLM's null block: no pool
            if block and (blocks is not None or tokens is not None):
                return CacheConfig(block, blocks, tokens, _whole(sample.labels, "prefix_cache_retention_interval"))
    return None


def read_cache_config(source: MetricsSource, api_key: str | None) -> CacheConfig | None:
    """The engine's cache from its /metrics exposition (before a run; one short request); None where the source
    is no exposition, does not answer, or shows no cache_config_info."""
    if source.kind != "exposition":
        return None
    request = urllib.request.Request(source.url)
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return cache_config(resp.read().decode())
    except (urllib.error.URLError, OSError, UnicodeDecodeError):
        return None
