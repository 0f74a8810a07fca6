"""Where replay and sessions read the engine's KV cache size: --kv-blocks/--kv-block-tokens, or the
cache_config_info series of its /metrics (telemetry.cache_config: vLLM's num_gpu_blocks, block_size and
kv_cache_size_tokens labels)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from loadproof.scenarios.replay import ReplayOptions
from loadproof.telemetry.cache_config import CacheConfig, cache_config

TRACE = "src/loadproof/data/traces/mooncake-conversation-300.jsonl"

EXPOSITION = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",num_cpu_blocks="None",num_gpu_blocks="400",prefix_caching_hash_algo="sha256"} 1.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_the_cache_size_is_read_from_cache_config_info():
    assert cache_config(EXPOSITION) == CacheConfig(block_tokens=128, num_blocks=400)
    assert cache_config(EXPOSITION).tokens == 51_200
    own = EXPOSITION.replace('engine="0",', 'engine="0",kv_cache_size_tokens="5979",')
    assert cache_config(own).tokens == 5979  # the engine's own count wins (a hybrid model's groups)


def test_an_exposition_without_whole_numbers_for_both_labels_gives_nothing():
    assert cache_config(EXPOSITION.replace('num_gpu_blocks="400"', 'num_gpu_blocks="None"')) is None
    assert cache_config(EXPOSITION.replace('num_gpu_blocks="400"', 'num_gpu_blocks="1"')) is None
    assert cache_config(EXPOSITION.replace('block_size="128",', "")) is None
    assert cache_config("vllm:num_requests_running 0.0\n") is None


def test_kv_blocks_and_kv_block_tokens_go_together():
    assert ReplayOptions(trace=TRACE, kv_blocks=400, kv_block_tokens=128).kv_blocks == 400
    with pytest.raises(ValidationError, match="go together"):
        ReplayOptions(trace=TRACE, kv_blocks=400)
