"""Whether the engine keeps a hybrid model's sliding-window KV only at checkpoints, and that window (docs/scenarios.md,
"sessions", "A sliding window kept at checkpoints"), for the checkpointed prefix-cache expectation
(`metrics.prefix_checkpoints`).

From `--engine-sliding-window N` where given (0: every block kept), else from two facts together: the engine's
/metrics `cache_config_info` says `prefix_cache_retention_interval` 0 (vLLM 0.32's default: sliding-window blocks
kept at checkpoints only; older vLLM does not say, and keeps them all), and the model's `config.json`, beside the
`--tokenizer` given, has sliding-window layers beside full-attention ones (a hybrid model: Gemma 3's five to one).
An engine started with `--disable-hybrid-kv-cache-manager` computes every layer as full attention and keeps
every block: its /metrics shows one group of layers (a cache of exactly its blocks x block size tokens), and no
window is taken; `--engine-sliding-window 0` says so for an engine whose /metrics does not say its size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loadproof.errors import ConfigError
from loadproof.planner.kv import ModelShape
from loadproof.telemetry.cache_config import CacheConfig, read_cache_config

RETENTION = "prefix_cache_retention_interval"


def hybrid_window(config: dict[str, Any]) -> int | None:
    """The sliding window of a model config with both sliding-window and full-attention layers (the smallest
    where there are several); None for any other model, or a config that is no model's."""
    try:
        layers = ModelShape.from_config(config).layers
    except (ConfigError, KeyError, TypeError, ValueError):
        return None
    windows = [layer.window for layer in layers if layer.kind == "sliding" and layer.window]
    if not windows or all(layer.kind == "sliding" for layer in layers):
        return None
    return min(windows)


def model_config(tokenizer_path: Path | None) -> dict[str, Any] | None:
    """The `config.json` in the tokenizer's folder, where there is one that reads as an object."""
    if tokenizer_path is None:
        return None
    folder = tokenizer_path if tokenizer_path.is_dir() else tokenizer_path.parent
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def one_group(cache: CacheConfig) -> bool:
    """Whether the engine's blocks serve one group of layers: its cache in tokens is its blocks x block size
    (a hybrid model's groups share the blocks, so its own count is smaller; vLLM 0.32 on the embedded Gemma 3:
    991,390 tokens in 10,922 blocks of 128, and with --disable-hybrid-kv-cache-manager 58,240 in 455)."""
    return (
        cache.kv_tokens is not None
        and cache.num_blocks is not None
        and cache.kv_tokens == cache.num_blocks * cache.block_tokens
    )


def checkpoint_window(target: Any, given: int | None) -> tuple[int | None, str | None]:
    """(the window the engine keeps at checkpoints, where that came from); (None, None) where it keeps every
    block or nothing says otherwise. `target`: the scenario's (its metrics source and tokenizer path)."""
    if given is not None:
        return (given or None), "--engine-sliding-window"
    config = model_config(target.tokenizer_path)
    window = hybrid_window(config) if config is not None else None
    if window is None:
        return None, None
    cache = read_cache_config(target.metrics, target.metrics_api_key)
    if cache is None or cache.retention_interval != 0 or one_group(cache):
        return None, None
    return (
        window,
        f"the model's config.json (sliding_window) and the engine's /metrics cache_config_info ({RETENTION} 0)",
    )
