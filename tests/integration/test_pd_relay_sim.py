"""The relay as a disaggregated pair's proxy (`--prefill-upstream`), in front of two simulators as real processes:
each request prefilled on the one (one token, not streamed), then streamed from the other; the hop's time on
the answer and in the client's record; a prefill instance's failure is the client's answer and the decode
instance never sees the request. The real pair (vLLM's KV connector) is tested in test_pd_engine.py."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from loadproof.client import StreamingClient
from tests.integration.sim_process import SimProcess, requests_served, spec
from tests.integration.test_relay import KEY, RelayProcess, metric

pytestmark = pytest.mark.timeout(60)


def generated(url: str) -> float:
    """The simulator's `vllm:generation_tokens_total` at `url`."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("vllm:generation_tokens_total"))


@pytest.fixture
def pair(tmp_path) -> Iterator[tuple[SimProcess, SimProcess, RelayProcess]]:
    # the prefill instance takes 20 ms a token of prompt (prompts differ from their first word: no prefix-cache hit)
    prefill = SimProcess(tmp_path / "prefill.log", config={"cost": {"prefill_s_per_token": 0.02}})
    decode = SimProcess(tmp_path / "decode.log")
    relay = RelayProcess(decode.url, tmp_path / "relay.log", "--prefill-upstream", prefill.url)
    yield prefill, decode, relay
    relay.stop()
    prefill.stop()
    decode.stop()


@pytest.mark.asyncio
async def test_each_request_is_prefilled_on_one_instance_then_streamed_from_the_other(pair):
    prefill, decode, relay = pair
    async with StreamingClient(relay.url, api_key=KEY) as client:
        recs = [
            await client.stream(spec(i, prompt=f"{i} " + "word " * 40, max_tokens=12, ignore_eos=True))
            for i in range(3)
        ]
    assert all(r.ok and r.output_tokens == 12 for r in recs), [r.error_message for r in recs]
    # the prefill instance generated one token a request, the decode instance all of them
    assert requests_served(prefill.url) == 3 and generated(prefill.url) == 3
    assert requests_served(decode.url) == 3 and generated(decode.url) == 36
    for r in recs:  # the hop is on the record: at least the prompt's prefill there, and inside the first token's wait
        assert r.prefill_hop_ns is not None and r.prompt_tokens * 0.02e9 <= r.prefill_hop_ns < r.ttft_ns
        assert r.kv_bytes is None  # no connector folder given
    assert await metric(relay.url, "loadproof_relay_prefill_requests_total") == 3
    assert await metric(relay.url, "loadproof_relay_prefill_failures_total") == 0


@pytest.mark.asyncio
async def test_a_failing_prefill_instance_is_the_clients_answer_and_the_decode_instance_never_sees_it(pair):
    prefill, decode, relay = pair
    prefill.set_faults("http_503")
    async with StreamingClient(relay.url, api_key=KEY) as client:
        rec = await client.stream(spec(max_tokens=8))
    assert not rec.ok and rec.http_status == 503
    assert requests_served(decode.url) == 0
    assert await metric(relay.url, "loadproof_relay_prefill_failures_total") == 1
    assert await metric(relay.url, 'loadproof_relay_requests_total{outcome="prefill_status"}') == 1
