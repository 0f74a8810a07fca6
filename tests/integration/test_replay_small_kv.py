"""A trace that outgrows the engine's KV cache, on a real embedded engine of 17 KV blocks: six prompts of
four shared blocks, visited in turn three times. A cache that kept everything would serve each prompt's
four shared blocks from the second round on (53% of the prompt tokens); an LRU cache of 16 usable blocks
(about three requests' worth) has evicted each prompt's blocks by the time it comes back, so the engine
hits nothing, and replay's expectation at the engine's size (read from its /metrics) says so.

The engine keeps one KV cache group (`--disable-hybrid-kv-cache-manager`: Gemma 3's sliding-window layers
keep whole blocks), which is what the expectation models."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.conftest import start_serve, stop_serve
from tests.integration.cyclic_trace import assert_read_against_bounded, write_cyclic_trace
from tests.integration.test_long_context import run

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]

# the embedded engine with 17 KV blocks of 128 tokens (16 usable: one is vLLM's null block), one KV group
PROFILE = """
name = "replay-small-kv"
engine = "embedded"

[model]
path = "embedded:gemma3-270m"
served_name = "gemma-3-270m"
dtype = "bfloat16"
max_model_len = 1024

[serving]
endpoint = "completions"
enforce_eager = true
extra_args = ["--disable-hybrid-kv-cache-manager"]
env = { VLLM_CPU_KVCACHE_SPACE = "1", VLLM_CPU_OMP_THREADS_BIND = "0-1", VLLM_CPU_NUM_OF_RESERVED_CPU = "0" }

[kv_cache]
num_blocks_override = 17
"""


@pytest.fixture(scope="module")
def small_kv_engine(tmp_path_factory):
    profile = tmp_path_factory.mktemp("profile") / "small-kv.toml"
    profile.write_text(PROFILE)
    handle = start_serve([str(profile)], tmp_path_factory.mktemp("small-kv-engine") / "serve.stderr")
    yield handle.engine
    stop_serve(handle)


def test_the_engine_is_read_against_the_expectation_at_its_size(small_kv_engine, tmp_path: Path):
    # the cyclic trace (tests/integration/cyclic_trace.py), 500 ms apart in the trace
    trace = write_cyclic_trace(tmp_path / "cyclic.jsonl", gap_ms=500)
    result, claims, run_dir = run("replay", small_kv_engine, tmp_path, "--trace", str(trace), "--block-tokens", "128")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert_read_against_bounded(claims, run_dir, blocks=17, block_tokens=128)
    assert "read the engine's rate against the expectation at its size (bounded)" in (run_dir / "report.md").read_text()
