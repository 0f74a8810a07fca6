"""The simulator's /metrics describe its KV cache as vLLM's do, with the `cache_config_info` gauge (vLLM's
CacheConfig as labels: block_size, num_gpu_blocks, kv_cache_size_tokens, cache_dtype, enable_prefix_caching,
...), so the scenarios that size a prefix-cache expectation by the engine find its size there: `run replay`
gets its bounded expectation without `--kv-blocks`, and `run sessions` says the engine's KV size in its header
(it printed "engine KV None tokens" while the gauge was missing). A real `loadproof sim` process throughout.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadproof.sim.text import tokenizer_path
from loadproof.telemetry.cache_config import CacheConfig, cache_config
from tests.integration.cyclic_trace import assert_read_against_bounded, write_cyclic_trace
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(180)


def test_the_metrics_carry_vllms_cache_config_info(tmp_path: Path):
    config = {"block_size": 32, "num_gpu_blocks": 500}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        with urllib.request.urlopen(sim.url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
    samples = [
        s for f in text_string_to_metric_families(text) for s in f.samples if s.name.startswith("vllm:cache_config")
    ]
    assert len(samples) == 1 and samples[0].value == 1.0, samples
    labels = samples[0].labels
    # vLLM counts its null block in num_gpu_blocks; the simulator's 500 blocks are all usable, so 501
    assert (labels["block_size"], labels["num_gpu_blocks"], labels["kv_cache_size_tokens"]) == ("32", "501", "16032")
    assert labels["enable_prefix_caching"] == "True" and labels["cache_dtype"] == "auto" and labels["engine"] == "0"
    assert {"num_cpu_blocks", "gpu_memory_utilization", "prefix_caching_hash_algo"} <= labels.keys()
    assert cache_config(text) == CacheConfig(32, 501, 16032)  # what loadproof's scenarios read


def test_a_replay_gets_the_bounded_expectation_from_the_simulators_metrics(tmp_path: Path):
    """The cyclic trace (tests/integration/cyclic_trace.py: 64 tokens a block, the trace's 512-token blocks
    scaled) on a simulator of 64 blocks of 16 tokens, about three requests' worth. No --kv-blocks: the size
    comes from the simulator's /metrics."""
    trace = write_cyclic_trace(tmp_path / "cyclic.jsonl", gap_ms=200)
    with SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0, "num_gpu_blocks": 64}) as sim:
        code, claims, run = run_scenario(
            sim, tmp_path, "replay", "--trace", str(trace), "--block-tokens", "64", "--max-output-tokens", "2"
        )
    assert code == 0, claims
    assert_read_against_bounded(claims, run, blocks=65, block_tokens=16)


@contextmanager
def without_cache_config(url: str) -> Iterator[str]:
    """An exposition of the simulator's /metrics at `url` without its cache_config_info, as an engine older than
    that gauge shows them: the URL of its /metrics."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
                lines = resp.read().decode().splitlines(keepends=True)
            body = "".join(line for line in lines if "cache_config_info" not in line).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize(
    ("cache_info", "expected"),
    [
        (True, "; engine KV 131088 tokens in blocks of 16 (the engine's /metrics vllm:cache_config_info)"),
        (False, "; engine KV blocks of 16 (the "),  # the size unknown: left out (the block size an adapter's default)
    ],
    ids=["cache_config_info", "no_cache_config_info"],
)
def test_the_sessions_header_says_the_engines_kv_size_and_never_none(tmp_path: Path, cache_info: bool, expected: str):
    with (
        SimProcess(tmp_path / "sim.log", config={"time_scale": 10.0}) as sim,
        nullcontext(sim.url + "/metrics") if cache_info else without_cache_config(sim.url) as metrics,
    ):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadproof",
                "run",
                "sessions",
                "--url",
                sim.url,
                "--engine-metrics",
                metrics,
                "--tokenizer",
                str(tokenizer_path()),
                "--out",
                str(tmp_path / "runs"),
                "--endpoint",
                "completions",
                "-u",
                "2",
                "-t",
                "2",
                "--first-tokens",
                "200",
                "--turn-tokens",
                "32",
                "--output-tokens",
                "4",
                "--think-time-s",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    output = proc.stdout + proc.stderr
    header = [line for line in output.splitlines() if line.startswith("sessions: 2 users x 2 turns")]
    assert len(header) == 1, output[-3000:]
    assert "None" not in header[0] and expected in header[0], header[0]
