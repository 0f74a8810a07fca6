"""Every fault of `loadproof sim`, seen through loadproof's own StreamingClient.

The simulator runs as a real process (`loadproof sim`) on a free port in a process group of its own;
faults are set at start (`--fault`) or at run time through its control endpoint (POST /sim/faults).
`SimProcess` (tests/integration/sim_process.py) is shared with the scenario, relay and supervisor tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tokenizers import Tokenizer

from loadproof.client import StreamingClient
from loadproof.protocol.routes import request_body
from loadproof.records import RequestRecord
from loadproof.sim.text import tokenizer_path
from loadproof.workloads.haystack import HaystackBuilder, retrieved
from tests.integration.sim_process import SimProcess, spec, until_tokens
from tests.polling import eventually

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator:
    started: list[SimProcess] = []

    def start(*args: str, config: dict[str, Any] | None = None) -> SimProcess:
        sim = SimProcess(tmp_path / f"sim-{len(started)}.log", *args, config=config)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


@pytest.mark.asyncio
async def test_crash_exits_13_and_the_client_sees_a_lost_connection(sim_factory):
    sim = sim_factory()
    async with StreamingClient(sim.url) as client:
        live = RequestRecord(request_id="live", endpoint="completions")
        task = asyncio.create_task(client.stream(spec(prompt="a long one", max_tokens=2000, ignore_eos=True), live))
        await until_tokens(live, 2)
        sim.set_faults("crash")
        rec = await task
        assert sim.wait_exit() == 13
        after = await client.stream(spec(1))
    assert not rec.ok and rec.error_kind == "disconnect", rec.error_message
    assert 2 <= rec.output_tokens < 2000
    assert after.error_kind == "disconnect" and "connect" in after.error_message.lower(), after.error_message


@pytest.mark.asyncio
async def test_crash_from_start_spares_after_requests_then_kills_on_the_next(sim_factory):
    sim = sim_factory("--fault", "crash", config={"faults": {"after_requests": 1}})
    async with StreamingClient(sim.url) as client:
        first = await client.stream(spec(0))
        second = await client.stream(spec(1))
    assert first.ok, first.error_message
    assert second.error_kind == "disconnect" and second.http_status is None
    assert sim.wait_exit() == 13


@pytest.mark.asyncio
async def test_hang_keeps_health_200_while_the_request_times_out(sim_factory):
    sim = sim_factory()
    sim.set_faults("hang")
    async with StreamingClient(sim.url) as client:
        rec = await client.stream(spec(deadline_s=1.5))
    assert sim.healthy()
    assert not rec.ok and rec.error_kind == "timeout", rec.error_message
    assert rec.http_status == 200 and rec.first_token_ns is None  # headers came, then nothing
    sim.wait_idle(within_s=2.0)  # the client leaving aborted the request even though the engine is stuck


@pytest.mark.asyncio
async def test_slow_multiplies_ttft_by_the_slowdown(sim_factory):
    # one step per first token: 200 ms of step overhead, negligible prefill; each prompt is distinct so
    # no prefix-cache hit shortens a prefill
    sim = sim_factory(config={"cost": {"step_overhead_s": 0.2, "prefill_s_per_token": 0.0, "decode_s_per_seq": 0.0}})
    slowdown = 4.0

    async def ttfts_s(tag: str) -> list[float]:
        out = []
        async with StreamingClient(sim.url) as client:
            for i in range(2):
                rec = await client.stream(spec(i, prompt=f"{tag} prompt number {i}", max_tokens=1))
                assert rec.ok, rec.error_message
                out.append((rec.first_token_ns - rec.send_ns) / 1e9)
        return out

    base = await ttfts_s("plain")
    sim.set_faults("slow", slowdown=slowdown)
    slow = await ttfts_s("slowed")
    ratio = min(slow) / min(base)  # min: load on the machine only ever adds time
    assert 0.18 <= min(base) < 0.6, base
    assert 0.7 * slowdown <= ratio <= 1.2 * slowdown, (base, slow)


@pytest.mark.asyncio
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_error_event_makes_the_200_stream_a_stream_error(sim_factory, endpoint):
    sim = sim_factory()
    sim.set_faults("error_event", after_tokens=4)
    async with StreamingClient(sim.url) as client:
        rec = await client.stream(spec(max_tokens=64, ignore_eos=True, endpoint=endpoint))
    assert not rec.ok and rec.http_status == 200
    assert rec.error_kind == "stream_error" and "simulated engine error" in rec.error_message
    assert rec.output_tokens == 4
    sim.wait_idle(within_s=1.0)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("fault", "status", "message"),
    [("http_500", 500, "simulated internal error"), ("http_503", 503, "simulated overload")],
)
async def test_http_faults_are_typed_http_errors_after_the_spared_requests(sim_factory, fault, status, message):
    sim = sim_factory()
    sim.set_faults(fault, after_requests=1)
    async with StreamingClient(sim.url) as client:
        spared = await client.stream(spec(0))
        failed = await client.stream(spec(1))
    assert spared.ok, spared.error_message
    assert not failed.ok and failed.error_kind == "http_status" and failed.http_status == status
    assert failed.error_message == f"HTTP {status}: {message}"


@pytest.mark.asyncio
async def test_refuse_refuses_new_connections_while_open_streams_finish(sim_factory):
    # 20 ms per step: the open stream of 60 tokens outlives the refusal by about a second
    sim = sim_factory()
    async with StreamingClient(sim.url) as client:
        live = RequestRecord(request_id="open", endpoint="completions")
        task = asyncio.create_task(client.stream(spec(prompt="open before", max_tokens=60, ignore_eos=True), live))
        await until_tokens(live, 2)
        sim.set_faults("refuse")

        async def closed() -> bool:
            return not await asyncio.to_thread(sim.healthy)

        await eventually(closed, 10, "the simulator stopped taking connections")
        async with StreamingClient(sim.url) as fresh:
            refused = await fresh.stream(spec(1))
        done = await task
    assert refused.error_kind == "disconnect" and "connect" in refused.error_message.lower(), refused.error_message
    assert refused.http_status is None
    assert done.ok and done.output_tokens == 60, done.error_message
    assert sim.proc.poll() is None and not sim.healthy()  # alive, yet unreachable


@pytest.mark.asyncio
async def test_wrong_answer_misses_the_planted_value_that_is_retrieved_without_it(sim_factory):
    sim = sim_factory()
    builder = HaystackBuilder(Tokenizer.from_file(str(tokenizer_path())), overhead_tokens=0, seed=5, pool_size=256)
    prompts = [builder.build(f"s{i}", 300) for i in range(2)]
    async with StreamingClient(sim.url) as client:
        right = await client.stream(spec(0, prompt=prompts[0].text, max_tokens=48))
        sim.set_faults("wrong_answer")
        wrong = await client.stream(spec(1, prompt=prompts[1].text, max_tokens=48))
    assert right.ok and wrong.ok, (right.error_message, wrong.error_message)
    assert right.prompt_tokens == 300 and wrong.prompt_tokens == 300
    assert retrieved(prompts[0].asked, right.output_text), right.output_text
    assert not retrieved(prompts[1].asked, wrong.output_text), wrong.output_text
    assert any(ch.isdigit() for ch in wrong.output_text[:20])  # it still answers with a code, a wrong one


@pytest.mark.asyncio
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_drop_cuts_the_stream_before_done(sim_factory, endpoint):
    sim = sim_factory()
    sim.set_faults("drop", after_tokens=3)
    async with StreamingClient(sim.url) as client:
        rec = await client.stream(spec(max_tokens=64, ignore_eos=True, endpoint=endpoint))
        again = await client.stream(spec(1, max_tokens=64, ignore_eos=True, endpoint=endpoint))
    assert not rec.ok and rec.error_kind == "disconnect", rec.error_message
    assert rec.output_tokens == 3 and rec.finish_reason is None
    assert again.error_kind == "disconnect"  # the pool's next connection works, and is cut again
    sim.wait_idle(within_s=1.0)


@pytest.mark.asyncio
async def test_client_leaving_mid_stream_frees_its_blocks_at_once(sim_factory):
    sim = sim_factory()
    total = sim.state()["num_gpu_blocks"]
    async with StreamingClient(sim.url) as client:
        live = RequestRecord(request_id="leaving", endpoint="completions")
        task = asyncio.create_task(client.stream(spec(prompt="x" * 500, max_tokens=4000, ignore_eos=True), live))
        await until_tokens(live, 3)
        during = sim.state()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        freed_after_s = sim.wait_idle(within_s=0.5)
    assert during["running"] and during["num_free_blocks"] <= total - 500 // 16
    assert live.error_kind == "cancelled" and freed_after_s < 0.5


@pytest.mark.asyncio
async def test_a_non_streaming_client_leaving_frees_its_blocks_too(sim_factory):
    sim = sim_factory()
    body = request_body("completions", "sim", "x" * 500, max_tokens=4000, ignore_eos=True, stream=False)

    async def ask() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.post(
                sim.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                await resp.read()

    task = asyncio.create_task(ask())

    def running() -> dict | None:
        assert not task.done(), "the request ended before it ran"
        state = sim.state()
        return state if state["running"] else None

    during = await eventually(running, 10, "the request running")
    await asyncio.sleep(0.2)  # sleep: the scenario: a few decode steps before the client leaves
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert during["num_free_blocks"] <= during["num_gpu_blocks"] - 500 // 16
    assert sim.wait_idle(within_s=0.5) < 0.5


@pytest.mark.asyncio
async def test_chat_streams_carry_usage_on_every_chunk_as_vllm_does(sim_factory):
    sim = sim_factory()
    async with StreamingClient(sim.url) as client:
        rec = await client.stream(spec(endpoint="chat", max_tokens=8, ignore_eos=True))
    assert rec.ok and rec.output_tokens == 8
    assert rec.chunk_usage  # the role-only first chunk has usage too
    assert sum(rec.chunk_tokens) == 8
