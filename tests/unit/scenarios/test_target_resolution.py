"""The target resolved once: its URLs built from the base URL, what the server says about itself asked once
(the model, its context length, the version, whether it tokenizes), and where prompt texts are counted
(`--tokenizer` wins; else the engine's /tokenize; else one error line asking for `--tokenizer`)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.protocol.urls import url_of
from loadproof.scenarios.target import Target
from loadproof.scenarios.token_counts import EngineTokens, tokenize_overhead_tokens, tokens_for
from loadproof.sim.text import tokenizer_path
from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.tokens import LocalTokens
from tests.unit.scenarios.test_target import serve

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("http://h:1", "/v1/models", "http://h:1/v1/models"),
        ("http://h:1/", "/v1/models", "http://h:1/v1/models"),
        ("http://gw/llm", "/tokenize", "http://gw/llm/tokenize"),
        ("http://gw/llm/", "metrics", "http://gw/llm/metrics"),
        ("https://gw/a/b", "/v1/chat/completions", "https://gw/a/b/v1/chat/completions"),
    ],
)
def test_a_path_joins_the_base_url_keeping_its_prefix(base, path, url):
    assert url_of(base, path) == url


def test_the_target_builds_every_url_it_sends_to():
    chat = Target(url="http://gw/llm/", model="m", endpoint="chat")
    assert chat.request_url == "http://gw/llm/v1/chat/completions"
    assert chat.tokenize_url == "http://gw/llm/tokenize" and chat.metrics.url == "http://gw/llm/metrics"
    assert Target(url="http://h:1", model="m", endpoint="completions").request_url == "http://h:1/v1/completions"


class FakeServer:
    """/v1/models, /version and (optionally) /tokenize, counting every request by path."""

    def __init__(self, *, tokenize: bool, models: list[dict] | None = None) -> None:
        self.seen: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.tokenize = tokenize
        self.responses = True
        self.models = models if models is not None else [{"id": "first", "max_model_len": 4096}, {"id": "second"}]

    async def handle(self, request: web.Request) -> web.Response:
        self.seen[request.path] += 1
        if request.path == "/llm/v1/models":
            return web.json_response({"object": "list", "data": self.models})
        if request.path == "/llm/version":
            return web.json_response({"version": "0.32.0"})
        if request.path in ("/llm/v1/responses", "/llm/v1/messages") and self.responses:
            body = await request.json()
            self.bodies.append(body)
            text = body["input"][0]["content"] if "input" in body else body["messages"][0]["content"]
            usage = {"input_tokens": len(f"<u>{text}<a>".encode()) + 1, "output_tokens": 1}  # 1 more than chat's
            if "messages" in body:  # Anthropic's usage: the cached part apart from input_tokens
                usage = {"input_tokens": usage["input_tokens"] - 2, "cache_read_input_tokens": 2, "output_tokens": 1}
            return web.json_response({"usage": usage})
        if request.path == "/llm/tokenize" and self.tokenize:
            body = await request.json()
            self.bodies.append(body)
            text = body["prompt"] if "prompt" in body else "".join(f"<u>{m['content']}<a>" for m in body["messages"])
            return web.json_response({"count": len(text.encode()), "max_model_len": 4096})
        return web.json_response({"error": "not found"}, status=404)


@pytest_asyncio.fixture
async def server(request):
    """A FakeServer (with /tokenize unless parametrized False) and its base URL (with a path prefix)."""
    fake = FakeServer(tokenize=getattr(request, "param", True))
    url, runner = await serve(fake.handle)
    yield fake, url + "/llm"
    await runner.cleanup()


def resolved(url: str, model: str = "first", endpoint: str = "chat", tokenize: bool = True, **fields) -> Target:
    """The target resolved as a command resolves it (in a thread: the fake server runs on this loop)."""
    return Target(url=url, model=model, endpoint=endpoint, **fields).resolve(tokenize=tokenize)


@pytest.mark.asyncio
async def test_resolution_asks_the_server_once_and_carries_what_the_scenarios_need(server):
    fake, url = server
    target = await asyncio.to_thread(resolved, url, "", "completions")
    assert (target.model, target.max_model_len, target.served.version) == ("first", 4096, "0.32.0")
    assert target.tokenizer_source == "engine" and target.describe()["tokenizer_source"] == "engine"
    assert fake.seen == {"/llm/v1/models": 1, "/llm/version": 1, "/llm/tokenize": 1}
    assert fake.bodies == [{"model": "first", "prompt": "Archive calibration line.", "add_special_tokens": False}]
    second = await asyncio.to_thread(resolved, url, "second", tokenize=False)
    assert second.max_model_len is None and second.tokenizer_source is None  # not asked: no /tokenize request
    assert fake.seen["/llm/tokenize"] == 1
    with pytest.raises(UsageError, match=r"does not serve model 'third'; it serves: first, second$"):
        await asyncio.to_thread(resolved, url, "third")


@pytest.mark.asyncio
async def test_a_given_tokenizer_wins_and_the_engine_is_not_asked(server):
    fake, url = server
    target = await asyncio.to_thread(resolved, url, tokenizer_path=tokenizer_path())
    assert target.tokenizer_source == "local" and "/llm/tokenize" not in fake.seen
    assert isinstance(tokens_for(target), LocalTokens)


@pytest.mark.asyncio
async def test_the_engine_sizes_prompts_exactly_as_a_local_tokenizer_of_the_same_counts_would(server):
    fake, url = server
    target = await asyncio.to_thread(resolved, url)
    tokens = tokens_for(target)
    assert isinstance(tokens, EngineTokens) and tokens.source == "engine"
    overhead, how = await asyncio.to_thread(tokenize_overhead_tokens, target, tokens)
    assert (overhead, how) == (len("<u><a>"), "engine /tokenize")
    builder = await asyncio.to_thread(
        HaystackBuilder, tokens, overhead_tokens=overhead, seed=3, pool_size=64, style="chat"
    )
    local = HaystackBuilder(
        LocalTokens.load(tokenizer_path()), overhead_tokens=overhead, seed=3, pool_size=64, style="chat"
    )
    assert builder.sentences == local.sentences  # the byte tokenizer counts as the fake engine does
    prompt = await asyncio.to_thread(builder.build, "s1", 900)
    assert overhead + len(prompt.text.encode()) == 900
    asked = fake.seen["/llm/tokenize"]
    await asyncio.to_thread(builder.build, "s1", 900)  # the same texts again: counted once
    assert fake.seen["/llm/tokenize"] - asked <= 2  # only the new salt line's texts


@pytest.mark.asyncio
@pytest.mark.parametrize("server", [False], indirect=True)
async def test_a_target_that_does_not_tokenize_asks_for_the_tokenizer_in_one_line(server):
    _, url = server
    target = await asyncio.to_thread(resolved, url)
    assert (
        target.tokenizer_source is None and target.served.tokenize_error == "HTTP 404: not found"
    )  # the server's own words
    with pytest.raises(UsageError) as caught:
        tokens_for(target)
    assert "\n" not in str(caught.value)
    assert str(caught.value).endswith(
        "answered HTTP 404: not found); give --tokenizer PATH (tokenizer.json or its folder)"
    )


def test_token_counts_local_without_a_tokenizer_is_one_line():
    target = Target(url="http://h:1", model="m", endpoint="chat", token_counts="local")
    with pytest.raises(UsageError, match=r"^--token-counts local counts with the model's tokenizer .*--tokenizer PATH"):
        tokens_for(target)


def test_an_unreachable_server_is_an_environment_failure_naming_the_url():
    with pytest.raises(EnvironmentFailure, match=r"^cannot reach http://127.0.0.1:9/v1/models: "):
        Target(url="http://127.0.0.1:9", model="", endpoint="chat").resolve()


def test_the_manifest_shape_keeps_its_keys(tmp_path: Path):
    described = Target(url="http://h:1", model="m", endpoint="chat", api_key="sk-9").describe()
    assert list(described) == [
        "url",
        "model",
        "endpoint",
        "api_key_used",
        "extra_body",
        "tokenizer",
        "tokenizer_source",
        "metrics",
        "token_counts",
        "thinking",
        "reasoning_effort",
        "fleet",
    ]
    assert "sk-9" not in json.dumps(described)


@pytest.mark.asyncio
@pytest.mark.parametrize("endpoint", ["responses", "messages"])
async def test_a_route_the_server_does_not_serve_is_one_line_before_the_run(server, endpoint):
    fake, url = server
    fake.responses = False
    with pytest.raises(UsageError, match=rf"does not serve the {endpoint} route: /v1/{endpoint} answered HTTP 404"):
        await asyncio.to_thread(resolved, url, "first", endpoint, False)
    assert fake.seen[f"/llm/v1/{endpoint}"] == 1  # asked once, with one output token


@pytest.mark.asyncio
@pytest.mark.parametrize("endpoint", ["responses", "messages"])
async def test_a_route_tokenize_cannot_render_is_measured_on_the_route_itself(server, endpoint):
    """vLLM renders a Responses input one token longer than the same chat message: /tokenize (chat messages)
    would plan every prompt one token short, so the overhead comes from one request's usage on the route."""
    fake, url = server
    target = await asyncio.to_thread(resolved, url, "first", endpoint)
    overhead, how = await asyncio.to_thread(tokenize_overhead_tokens, target, tokens_for(target))
    assert (overhead, how) == (len("<u><a>") + 1, f"the engine's usage on /v1/{endpoint}")
    assert fake.bodies[-1]["max_output_tokens" if endpoint == "responses" else "max_tokens"] == 1
