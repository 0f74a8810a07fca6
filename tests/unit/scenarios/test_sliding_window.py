"""Where sessions learn that the engine keeps a hybrid model's sliding window only at checkpoints
(scenarios.sliding_window): `--engine-sliding-window`, else the model's config.json beside the tokenizer
together with the engine's cache_config_info saying prefix_cache_retention_interval 0."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadproof.scenarios import sliding_window
from loadproof.scenarios.sliding_window import checkpoint_window, hybrid_window
from loadproof.telemetry.cache_config import CacheConfig, cache_config

GEMMA3 = {
    "architectures": ["Gemma3ForCausalLM"],
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "hidden_size": 640,
    "sliding_window": 512,
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
}
EXPOSITION = (
    'vllm:cache_config_info{block_size="128",engine="0",num_gpu_blocks="10922",'
    'kv_cache_size_tokens="991390",prefix_cache_retention_interval="0",sliding_window="None"} 1.0\n'
)


def test_a_hybrid_models_window():
    assert hybrid_window(GEMMA3) == 512
    assert hybrid_window({"text_config": GEMMA3}) == 512
    assert hybrid_window({**GEMMA3, "layer_types": ["full_attention"] * 6}) is None  # no sliding layer
    assert hybrid_window({**GEMMA3, "layer_types": ["sliding_attention"] * 6}) is None  # no full one: not hybrid
    assert hybrid_window({**GEMMA3, "sliding_window": None}) is None
    assert hybrid_window({"layer_types": "no model"}) is None


def test_the_engines_retention_interval_is_read_from_cache_config_info():
    assert cache_config(EXPOSITION) == CacheConfig(128, 10922, 991_390, 0)
    assert cache_config(EXPOSITION.replace('prefix_cache_retention_interval="0"', 'x="1"')).retention_interval is None
    dense = EXPOSITION.replace('prefix_cache_retention_interval="0"', 'prefix_cache_retention_interval="None"')
    assert cache_config(dense).retention_interval is None


def target(folder: Path | None) -> SimpleNamespace:
    return SimpleNamespace(tokenizer_path=folder, metrics=None, metrics_api_key=None)


def test_the_window_from_the_option_else_the_model_and_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "config.json").write_text(json.dumps(GEMMA3), encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    told: list[CacheConfig | None] = [CacheConfig(128, 10922, 991_390, 0)]
    monkeypatch.setattr(sliding_window, "read_cache_config", lambda _source, _key: told[0])
    window, source = checkpoint_window(target(tmp_path / "tokenizer.json"), None)
    assert window == 512 and "prefix_cache_retention_interval 0" in str(source)
    assert checkpoint_window(target(tmp_path), 0) == (None, "--engine-sliding-window")
    assert checkpoint_window(target(tmp_path), 1024) == (1024, "--engine-sliding-window")
    told[0] = CacheConfig(128, 455, 58_240, 0)  # one group of layers: --disable-hybrid-kv-cache-manager
    assert checkpoint_window(target(tmp_path), None) == (None, None)
    told[0] = CacheConfig(128, 10922, 991_390, None)  # an engine that keeps every block (or does not say)
    assert checkpoint_window(target(tmp_path), None) == (None, None)
    told[0] = None  # no exposition
    assert checkpoint_window(target(tmp_path), None) == (None, None)
    told[0] = CacheConfig(128, 10922, 991_390, 0)
    assert checkpoint_window(target(None), None) == (None, None)  # the engine's /tokenize: no model folder
    (tmp_path / "config.json").write_text("[1, 2]", encoding="utf-8")
    assert checkpoint_window(target(tmp_path), None) == (None, None)
