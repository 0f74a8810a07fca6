"""The simulator's /metrics speak the seconds its clients measure, whatever `--time-scale` it runs at.

Its scheduler models time `time_scale` times faster than the wall clock; the engine's TTFT histogram used to
be filled in modeled seconds, so at `--time-scale 20` a replay's `crosscheck.ttft_mean_s.diff_pct` read
-95% (the engine's mean 20 times the client's) and nothing flagged it. Here the simulator runs as a real
process at scale 20, a burst of long prompts queues so that TTFT is mostly the engine's own (prefill and
queueing, not HTTP), and the engine's mean TTFT from its /metrics is compared with the client's, computed
here from the records (not through metrics.engine_agreement, so a bug there cannot confirm itself).
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest

from loadproof.client import StreamingClient
from loadproof.telemetry.server_metrics import parse_metrics
from loadproof.units import NS_PER_S
from tests.integration.sim_process import SimProcess, spec

pytestmark = pytest.mark.timeout(120)

TTFT = {"sum": "vllm:time_to_first_token_seconds_sum", "count": "vllm:time_to_first_token_seconds_count"}


def ttft_histogram(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        return parse_metrics(resp.read().decode(), TTFT)


@pytest.mark.asyncio
async def test_at_time_scale_20_the_engines_mean_ttft_is_in_the_clients_seconds(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", "--time-scale", "20") as sim:
        before = ttft_histogram(sim.url)
        async with StreamingClient(sim.url) as client:  # 8 prompts of ~10,000 tokens at once: ~0.6 s wall each
            records = await asyncio.gather(
                *[client.stream(spec(i, prompt="word " * 2000, max_tokens=4)) for i in range(8)]
            )
        after = ttft_histogram(sim.url)
    assert all(r.ok for r in records), [r.error_message for r in records]
    assert after["count"] - before["count"] == 8
    engine_mean_s = (after["sum"] - before["sum"]) / 8
    client_mean_s = sum(r.ttft_ns for r in records if r.ttft_ns is not None) / 8 / NS_PER_S
    # the engine's clock starts when a request reaches it, after HTTP and tokenization: never later than the
    # client's (2% for rounding); and HTTP is a small part of these TTFTs, not a factor of the time scale
    assert engine_mean_s <= client_mean_s * 1.02, (engine_mean_s, client_mean_s)
    assert engine_mean_s >= client_mean_s / 2, (engine_mean_s, client_mean_s)
