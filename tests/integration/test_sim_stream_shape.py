"""The simulator streams as vLLM 0.32 does (`chat_completion/serving.py`, `completion/serving.py`), read here as
raw SSE lines from a real `loadproof sim` process over real HTTP.

vLLM sends nothing before the engine's first output: the chat role chunk (`delta: {"role": "assistant",
"content": ""}`) goes out on the first iteration of the engine's results, which is the first token, right before
that token's chunk; the simulator used to send it before the prefill, so a tool that times the first chunk read
a TTFT of a few milliseconds. vLLM puts `finish_reason` on the chunk of the last token, not on an empty chunk of
its own; with `stream_options.include_usage` a chunk with no choices carries the usage after it, and with
`continuous_usage_stats` too every chunk carries the counts so far (the role chunk 0 completion tokens).
The prefill here is long enough (about 0.5 s of the simulator's modeled time, at time scale 1) that a chunk
sent before it is told apart by its arrival, a lower bound that a loaded machine cannot make flaky.
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
import pytest

from loadproof.client import StreamingClient
from loadproof.units import NS_PER_S
from tests.integration.sim_process import SimProcess, spec

pytestmark = pytest.mark.timeout(90)

PREFILL_S_PER_TOKEN = 5e-4
CONFIG = {
    "time_scale": 1.0,
    "cost": {"step_overhead_s": 0.005, "prefill_s_per_token": PREFILL_S_PER_TOKEN, "decode_s_per_seq": 5e-4},
}
PROMPT = "word " * 200  # 1,000 tokens (one a byte): about 0.5 s of prefill


async def raw_events(url: str, path: str, body: dict[str, Any]) -> list[tuple[float, str]]:
    """Each `data:` payload of a stream with its arrival, in seconds after the request was sent."""
    events: list[tuple[float, str]] = []
    async with aiohttp.ClientSession() as http:
        sent = time.monotonic()
        async with http.post(url + path, json=body) as resp:
            assert resp.status == 200, await resp.text()
            async for raw in resp.content:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    events.append((time.monotonic() - sent, line.removeprefix("data:").strip()))
    return events


def prefill_s(prompt_tokens: int) -> float:
    """The modeled prefill of a cold prompt (less its step overhead): no chunk can come before it."""
    return prompt_tokens * PREFILL_S_PER_TOKEN


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with SimProcess(tmp_path_factory.mktemp("sim") / "sim.log", config=CONFIG) as process:
        yield process


@pytest.mark.asyncio
async def test_chat_sends_its_role_with_the_first_token_and_the_finish_reason_on_the_last(sim):
    body = {
        "model": "sim",
        "messages": [{"role": "user", "content": "chat " + PROMPT}],
        "max_tokens": 5,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    events = await raw_events(sim.url, "/v1/chat/completions", body)
    assert events[-1][1] == "[DONE]"
    chunks = [(t, json.loads(p)) for t, p in events[:-1]]
    *with_choices, (_, final) = chunks
    usage = final["usage"]
    # the role chunk is the first event, and it comes after the prefill: with the first token, not before
    role_at, role = with_choices[0]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert role["choices"][0]["finish_reason"] is None and role["usage"]["completion_tokens"] == 0
    assert role_at >= 0.8 * prefill_s(usage["prompt_tokens"]), (role_at, usage)
    # then one chunk a token, each with its content; none without content, none after the last token's
    tokens = [c for _, c in with_choices[1:]]
    assert len(tokens) == usage["completion_tokens"] == 5
    assert all(c["choices"][0]["delta"].get("content") for c in tokens), tokens
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 4 + ["length"]
    assert [c["usage"]["completion_tokens"] for c in tokens] == [1, 2, 3, 4, 5]
    # the usage chunk after it: no choices, the whole usage
    assert final["choices"] == [] and usage["total_tokens"] == usage["prompt_tokens"] + 5
    assert "cached_tokens" in usage["prompt_tokens_details"]
    # loadproof's own client reads that shape: TTFT at the first token, one chunk a token (the role is none)
    async with StreamingClient(sim.url) as client:
        record = await client.stream(spec(prompt="client " + PROMPT, max_tokens=5, ignore_eos=True, endpoint="chat"))
    assert record.ok, record.error_message
    assert record.finish_reason == "length" and record.output_tokens == 5
    assert record.chunk_tokens == [1] * 5 and len(record.chunk_ns) == 5
    assert record.ttft_ns is not None and record.ttft_ns / NS_PER_S >= 0.8 * prefill_s(record.prompt_tokens or 0)


@pytest.mark.asyncio
async def test_completions_send_nothing_before_the_first_token_and_stop_on_the_last(sim):
    body = {"model": "sim", "prompt": "text " + PROMPT, "max_tokens": 200, "stream": True}
    events = await raw_events(sim.url, "/v1/completions", body)
    assert events[-1][1] == "[DONE]"
    chunks = [(t, json.loads(p)) for t, p in events[:-1]]
    first_at = chunks[0][0]
    assert first_at >= 0.8 * prefill_s(len(body["prompt"])), first_at
    choices = [c["choices"][0] for _, c in chunks]
    assert all(ch["text"] for ch in choices), choices  # every chunk a token: no role, no empty finish chunk
    assert [ch["finish_reason"] for ch in choices[:-1]] == [None] * (len(choices) - 1)
    assert choices[-1]["finish_reason"] == "stop" and len(choices) < 200  # the answer ended by itself
    assert all("usage" not in c for _, c in chunks)  # no stream_options: no usage anywhere
