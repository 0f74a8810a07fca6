"""The relay in front of the real embedded engine (the session's, served with a tool-call parser): a client
leaving frees the engine's request; a tool call streams through unchanged, the openai SDK joining its deltas.

Apart from tests/integration/test_relay.py and test_relay_clients.py, whose upstreams are servers of their
own: needing no engine, they run beside the session engine's tests (on the other test worker,
tests/conftest.py) instead of after them.
"""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from loadproof.protocol.routes import request_body
from tests.integration.test_relay import KEY, RelayProcess, relay_factory  # noqa: F401 (relay_factory: a fixture)
from tests.polling import eventually

pytestmark = pytest.mark.timeout(900)


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
