"""The relay as a real process in front of `loadproof sim`: engine-side faults as a client of the relay sees them.

Only what the scripted upstream of test_relay.py cannot show is here: an engine's own in-band error
event passed through, a hang in the middle of a stream with the engine then aborting the request when
the relay's deadline closes the upstream, and a client leaving that frees the engine's KV blocks.
Not repeated: a dropped upstream connection (the simulator's `drop` cuts the chunked body exactly as the
scripted upstream's `drop_after` does: test_upstream_dying_mid_stream_is_an_in_band_error), the pool's
429 (decided before any upstream byte: test_pool_rejects_the_one_too_many_and_recovers_every_slot),
an unreachable upstream (test_unreachable_upstream_before_the_first_byte_is_an_http_error).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator

import pytest

from loadproof.client import StreamingClient
from loadproof.records import RequestRecord
from tests.integration.sim_process import SimProcess, spec, until_tokens
from tests.integration.test_relay import KEY, RelayProcess, metric
from tests.polling import eventually

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sim(tmp_path) -> Iterator[SimProcess]:
    process = SimProcess(tmp_path / "sim.log")
    yield process
    process.stop()


@pytest.fixture
def relay(tmp_path, sim) -> Iterator[Callable[..., RelayProcess]]:
    started: list[RelayProcess] = []

    def start(*args: str) -> RelayProcess:
        process = RelayProcess(sim.url, tmp_path / f"relay-{len(started)}.log", *args)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.proc.poll() is None:
            process.stop()


@pytest.mark.asyncio
async def test_an_engine_error_event_mid_stream_reaches_the_client_as_an_error_event(sim, relay):
    front = relay()
    sim.set_faults("error_event", after_tokens=4)
    async with StreamingClient(front.url, api_key=KEY) as client:
        rec = await client.stream(spec(max_tokens=64, ignore_eos=True))
    assert not rec.ok and rec.http_status == 200
    assert rec.error_kind == "stream_error" and "simulated engine error mid-stream" in rec.error_message
    assert rec.output_tokens == 4
    sim.wait_idle(within_s=1.0)
    assert await metric(front.url, "loadproof_relay_in_flight") == 0
    # the engine's own error event is an upstream error, in the metrics and the log, not an `ok`
    assert await metric(front.url, 'loadproof_relay_requests_total{outcome="upstream_error_event"}') == 1
    assert await metric(front.url, "loadproof_relay_upstream_errors_total") == 1
    rows = [json.loads(line) for line in front.stop().splitlines() if line.startswith("{")]
    assert [r["outcome"] for r in rows] == ["upstream_error_event"]


@pytest.mark.asyncio
async def test_an_engine_hung_mid_stream_gets_heartbeats_then_the_deadline_error_and_is_aborted(sim, relay):
    front = relay("--heartbeat-s", "0.5", "--deadline-s", "3")
    async with StreamingClient(front.url, api_key=KEY) as client:
        live = RequestRecord(request_id="hung", endpoint="completions")
        task = asyncio.create_task(
            client.stream(spec(prompt="y" * 400, max_tokens=4000, ignore_eos=True, deadline_s=30), live)
        )
        await until_tokens(live, 2)
        held = sim.state()
        sim.set_faults("hang")
        rec = await task
    assert held["running"] and held["num_free_blocks"] < held["num_gpu_blocks"]
    assert not rec.ok and rec.error_kind == "stream_error" and "deadline" in rec.error_message, rec.error_message
    assert 2 <= rec.output_tokens < 4000
    # the first comment at once, then one per 0.5 s of the ~3 s of silence
    assert rec.num_heartbeats >= 4, rec.num_heartbeats
    assert await metric(front.url, "loadproof_relay_heartbeats_total") >= 3
    assert sim.healthy()  # /health says fine throughout
    sim.wait_idle(within_s=1.0)  # the relay closed the upstream: the stuck engine dropped the request
    assert await metric(front.url, "loadproof_relay_in_flight") == 0


@pytest.mark.asyncio
async def test_a_client_leaving_the_relay_frees_the_engines_blocks(sim, relay):
    front = relay()
    async with StreamingClient(front.url, api_key=KEY) as client:
        live = RequestRecord(request_id="leaving", endpoint="completions")
        task = asyncio.create_task(client.stream(spec(prompt="z" * 500, max_tokens=4000, ignore_eos=True), live))
        await until_tokens(live, 3)
        held = sim.state()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert held["running"] and held["num_free_blocks"] <= held["num_gpu_blocks"] - 500 // 16
    assert sim.wait_idle(within_s=1.0) < 1.0
    await eventually(
        lambda: metric(front.url, "loadproof_relay_client_disconnects_total"),
        10,
        "the relay counted the client's leaving",
    )
    assert await metric(front.url, "loadproof_relay_in_flight") == 0
    assert await metric(front.url, "loadproof_relay_client_disconnects_total") == 1
