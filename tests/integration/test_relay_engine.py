"""The relay in front of the real embedded engine (the session's, served with a tool-call parser): a client
leaving frees the engine's request; a tool call streams through unchanged, the openai SDK joining its deltas.

Apart from tests/integration/test_relay.py and test_relay_clients.py, whose upstreams are servers of their
own: needing no engine, they run beside the session engine's tests (on the other test worker,
tests/conftest.py) instead of after them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from loadproof.protocol.routes import request_body
from tests.integration.test_relay import KEY, RelayProcess, relay_factory  # noqa: F401 (relay_factory: a fixture)
from tests.polling import eventually

pytestmark = pytest.mark.timeout(900)
KEY_ENV = "LOADPROOF_TEST_RELAY_KEY"


@pytest.mark.engine
@pytest.mark.asyncio
async def test_on_the_real_engine_a_client_leaving_frees_the_engine_request(engine, relay_factory):  # noqa: F811 (the fixture imported above)
    relay = relay_factory(engine.url)
    body = request_body("completions", engine.model, "Tell a very long story.", max_tokens=4000, ignore_eos=True)
    async with aiohttp.ClientSession() as s:
        resp = await s.post(relay.url + "/v1/completions", data=body, headers={"Authorization": f"Bearer {KEY}"})
        while engine.metric("vllm:num_requests_running") != 1:
            await resp.content.readany()
        await resp.content.readany()
        resp.close()
    await eventually(
        lambda: engine.metric("vllm:num_requests_running") == 0,
        1.0,
        "the engine stopping for a client that left through the relay",
        every_s=0.05,
    )


@pytest.mark.engine
@pytest.mark.asyncio
async def test_a_streamed_tool_call_passes_the_relay_unchanged(engine, tmp_path):
    """The openai SDK streams a tool call through the relay in front of the real engine (a named tool choice,
    which vLLM enforces with structured outputs; it needs a tool-call parser, which the session's engine is
    served with, as the packaged profile embedded-tools serves it): the SDK joins the call's deltas, and its arguments are the JSON the
    tool's parameters ask, as the engine answers the same request directly."""
    import jsonschema
    import openai

    examples = Path(__file__).resolve().parents[2] / "docs" / "examples"
    tools = json.loads((examples / "tools-weather.json").read_text())
    # strict: vLLM's hermes parser then decodes the arguments under the tool's parameters (without it only the
    # call's name is forced, and the 270M model ran past max_tokens inside the city's string)
    tools[0]["function"]["strict"] = True
    # the city bounded: unbounded, the small model repeats a letter inside it past max_tokens, and the SDK's
    # stream helper raises LengthFinishReasonError (seen on the embedded engine, 2026-12-01)
    tools[0]["function"]["parameters"]["properties"]["city"]["maxLength"] = 24
    ask = {
        "model": engine.model,
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "max_tokens": 128,
        "temperature": 0.0,
        "tools": tools,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    relay = RelayProcess(engine.url, tmp_path / "relay.log")
    try:
        # each client closed here: an unclosed one leaves its keep-alive socket to the garbage collector,
        # whose ResourceWarning fails whichever later test it lands in (two replay tests on CI, 2026-12-01)
        async with openai.AsyncOpenAI(base_url=relay.url + "/v1", api_key=KEY, max_retries=0) as client:
            async with client.chat.completions.stream(**ask) as stream:
                final = await stream.get_final_completion()
        async with openai.AsyncOpenAI(base_url=engine.url + "/v1", api_key="none", max_retries=0) as client:
            direct = await client.chat.completions.create(**ask)
    finally:
        relay.stop()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and call.id
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, tools[0]["function"]["parameters"])
    assert arguments == json.loads(direct.choices[0].message.tool_calls[0].function.arguments)


@pytest.mark.engine
@pytest.mark.asyncio
async def test_the_openai_responses_and_anthropic_messages_sdks_stream_through_the_relay(engine, tmp_path):
    """The official SDKs of the two APIs whose streams are named events ending in an event of their own (no
    `data: [DONE]`): the openai SDK's Responses stream and the anthropic SDK's Messages stream (which reads each
    event's `event:` line), through the relay in front of the real engine, a heartbeat due every 20 ms so that
    blank lines fall among the events. The text joined from the deltas is the answer's final text, and the
    usage each SDK reports is what the engine's own counters grew by."""
    import anthropic
    import openai

    relay = RelayProcess(engine.url, tmp_path / "relay.log", "--heartbeat-s", "0.02")
    counters = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count")

    def agrees(before: tuple[float, ...], input_tokens: int, output_tokens: int) -> None:
        """The engine's counters grew by the usage, besides what the supervisor's liveness probes (one token
        each, sent after 10 s with nothing done) took meanwhile: its count of first tokens shows them."""
        prompt, generated, firsts = (round(engine.metric(name) - b) for name, b in zip(counters, before))
        probes = firsts - 1
        assert probes >= 0 and 0 <= generated - output_tokens <= probes, (generated, output_tokens, probes)
        assert prompt == input_tokens if probes == 0 else prompt > input_tokens, (prompt, input_tokens, probes)

    ask = "Count from one to twenty, in words."
    try:
        before = tuple(engine.metric(name) for name in counters)
        async with openai.AsyncOpenAI(base_url=relay.url + "/v1", api_key=KEY, max_retries=0) as client:
            stream = await client.responses.create(
                model=engine.model, input=ask, max_output_tokens=24, temperature=0.0, store=False, stream=True
            )
            deltas, kinds, completed = [], [], None
            async for event in stream:
                kinds.append(event.type)
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
                elif event.type == "response.completed":
                    completed = event.response
        assert completed is not None and completed.usage is not None, kinds
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
        assert len(deltas) > 1 and "".join(deltas) == completed.output_text
        usage = completed.usage
        assert usage.output_tokens > 1
        agrees(before, usage.input_tokens, usage.output_tokens)

        before = tuple(engine.metric(name) for name in counters)
        async with anthropic.AsyncAnthropic(base_url=relay.url, api_key=KEY, max_retries=0) as claude:
            async with claude.messages.stream(
                model=engine.model,
                max_tokens=24,
                messages=[{"role": "user", "content": ask}],
                extra_body={"temperature": 0.0},  # the SDK's 2.x releases dropped the argument; the API takes it
            ) as messages:
                pieces = [text async for text in messages.text_stream]
                final = await messages.get_final_message()
        assert len(pieces) > 1 and "".join(pieces) == "".join(b.text for b in final.content if b.type == "text")
        assert final.stop_reason in ("max_tokens", "end_turn"), final.stop_reason
        assert final.usage.output_tokens > 1
        agrees(before, final.usage.input_tokens, final.usage.output_tokens)
        assert engine.metric("vllm:num_requests_running") == 0
    finally:
        log = relay.stop()
    rows = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert [(r["path"], r["outcome"], r["stream"]) for r in rows] == [
        ("/v1/responses", "ok", True),
        ("/v1/messages", "ok", True),
    ], rows


@pytest.mark.engine
@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_run_throughput_on_the_responses_and_messages_apis_through_the_relay_agrees_with_the_engine(
    engine, tmp_path, endpoint
):
    """loadproof's own client on the two APIs, through the relay (its key, the engine's metrics under
    /engine/metrics): every record has its first token and the usage's output tokens, and the crosscheck finds
    the engine's counters grown by what the run's usage says."""
    relay = RelayProcess(engine.url, tmp_path / "relay.log")
    try:
        argv = [
            *("run", "throughput", "--url", relay.url, "--engine-metrics", relay.url + "/engine/metrics"),
            *("--api-key-env", KEY_ENV, "--endpoint", endpoint, "--no-ignore-eos", "--families", "english"),
            *("--concurrency", "1", "--num-prompts", "2", "--max-tokens", "12", "--tokenizer", str(engine.tokenizer)),
            *("--out", str(tmp_path / "runs")),
        ]
        result = subprocess.run(
            [sys.executable, "-m", "loadproof", *argv],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, KEY_ENV: KEY},
        )
    finally:
        log = relay.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = (tmp_path / "runs").iterdir()
    rows = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["ok"] and r["endpoint"] == endpoint for r in rows), rows
    assert all(r["first_token_ns"] > r["send_ns"] and r["prompt_tokens"] > 0 for r in rows), rows
    # the usage's tokens, given once at the stream's end (no event of these APIs carries a running count)
    assert all(0 < r["output_tokens"] <= 12 and not r["chunk_usage"] for r in rows), rows
    claims = {c["name"]: c["value"] for c in json.loads((run / "claims.json").read_text())["claims"]}
    # the engine's counters grew by the run's usage, besides the supervisor's liveness probes (one token each,
    # sent after 10 s with nothing done), which its count of first tokens shows
    probes = claims["crosscheck.ttft_count.engine"] - claims["crosscheck.ttft_count.client"]
    assert claims["crosscheck.ttft_count.client"] == 2 and probes >= 0, claims
    generated = claims["crosscheck.generation_tokens.client"]
    assert generated == sum(r["output_tokens"] for r in rows) > 0
    assert 0 <= claims["crosscheck.generation_tokens.engine"] - generated <= probes, claims
    if probes == 0:
        assert claims["crosscheck.prompt_tokens.client"] == claims["crosscheck.prompt_tokens.engine"] > 0, claims
        assert claims["crosscheck.generation_tokens.diff_pct"] == 0.0
    assert {json.loads(line)["outcome"] for line in log.splitlines() if line.startswith("{")} == {"ok"}
    assert KEY not in "".join(p.read_text(errors="replace") for p in run.iterdir() if p.is_file())
