"""The simulator serves every route through its adapter (`protocol.routes`): the real client's record of each
route's stream, media tokens counted as the sim profile's rules say, the multimodal processor cache counted in
/metrics, and refusals in the route's own error shape."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from loadproof.client import RequestSpec, StreamingClient
from loadproof.protocol.media import audio_of, image_of
from loadproof.protocol.request import Message, Text
from loadproof.protocol.routes import ROUTES, encode, request_of, route_of
from tests.integration.sim_process import SimProcess
from tests.unit.protocol.media_files import png, wav

pytestmark = pytest.mark.timeout(90)

TEMPLATE = len("<|user|>\n") + len("\n<|assistant|>\n")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    config = {"time_scale": 20.0, "image_tokens": "patches:4+2", "audio_tokens": "per_s:50"}
    with SimProcess(tmp_path_factory.mktemp("sim") / "sim.log", config=config) as process:
        yield process


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{"))


async def send(url: str, route: str, prompt: str = "", **fields):
    request = request_of(route, "sim", prompt, **fields)
    async with StreamingClient(url) as client:
        return await client.stream(RequestSpec("r", route, encode(request), deadline_s=30))


@pytest.mark.asyncio
@pytest.mark.parametrize("name", [n for n in ROUTES.in_order() if route_of(n).generates])
async def test_every_generating_route_streams_what_its_client_reads(sim, name: str):
    route = route_of(name)
    if "audio" in route.media and not route.conversational:
        messages = [Message("user", (Text("hi"), audio_of(wav(0.5))))]
        record = await send(sim.url, name, messages=messages, max_tokens=5, ignore_eos=True)
        assert record.prompt_tokens == 2 + 25  # its text and 0.5 s at 50 tokens a second
    else:
        record = await send(sim.url, name, "hi", max_tokens=5, ignore_eos=True)
        assert record.prompt_tokens == 2 + (TEMPLATE if route.conversational else 0)
    assert record.ok, record.error_message
    assert record.output_tokens == 5 and len(record.output_text or "") == 5


@pytest.mark.asyncio
async def test_an_images_tokens_are_its_patch_grid_and_a_repeat_hits_the_mm_cache(sim):
    queries, hits = metric(sim.url, "vllm:mm_cache_queries_total"), metric(sim.url, "vllm:mm_cache_hits_total")
    image = image_of(png(10, 7, shade=17))
    for name in ("chat", "responses", "messages"):
        messages = [Message("user", (Text("what"), image))]
        record = await send(sim.url, name, messages=messages, max_tokens=3)
        assert record.ok, record.error_message
        assert record.prompt_tokens == TEMPLATE + 4 + 3 * 2 + 2  # ceil(10/4) x ceil(7/4) patches and 2 markers
    assert metric(sim.url, "vllm:mm_cache_queries_total") == queries + 3
    assert metric(sim.url, "vllm:mm_cache_hits_total") == hits + 2  # the same image, seen before


def post(url: str, path: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url + path, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_non_streamed_answer_and_the_routes_own_errors(sim):
    for name in ("chat", "completions", "responses", "messages"):
        body = encode(request_of(name, "sim", "hi", max_tokens=4, ignore_eos=True, stream=False))
        status, answer = post(sim.url, route_of(name).path, body)
        assert status == 200, answer
    status, answer = post(sim.url, "/v1/messages", b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}')
    assert status == 404 and answer["type"] == "error" and answer["error"]["type"] == "not_found_error"
    status, answer = post(sim.url, "/v1/chat/completions", b'{"messages": []}')
    assert status == 400 and answer["error"]["message"] == "messages must be a non-empty list"
    status, answer = post(sim.url, "/v1/embeddings", b'{"input": "x"}')
    assert status == 404  # a generating model serves no pooling route, as vLLM


def test_a_model_without_a_media_rule_refuses_media_as_a_text_only_vllm(tmp_path):
    with SimProcess(tmp_path / "sim.log", config={"image_tokens": ""}) as sim:
        messages = [Message("user", (Text("what"), image_of(png(4, 4))))]
        body = encode(request_of("chat", "sim", messages=messages, max_tokens=2))
        status, answer = post(sim.url, "/v1/chat/completions", body)
    assert status == 400 and "sim is not a multimodal model" in answer["error"]["message"]
