"""The relay in front of an engine that is silent before its first token and between two tokens, streamed
through by the clients people actually use, none written here: the `openai` Python SDK, curl, the `openai` Node
SDK, `vllm bench serve` (vLLM 0.32, the embedded engine's environment), GuideLLM 0.8.1 and AIPerf 0.13.0.
Each must succeed on every request while heartbeats fall in both silences.

Why: the relay's heartbeat was once a `:` comment, valid SSE that `vllm bench serve` cannot take: it
strips each network read before splitting events, so a comment arriving alone loses its terminator and
poisons the rest of the stream (0 of 32 requests). The blank line the relay sends now was measured
invisible to all five (docs/relay-and-supervisor.md); this test keeps it so.

The upstream is a real HTTP server in this process, sending vLLM-shaped chunks with usage: headers at once,
then GAP_S of silence, the first token, GAP_S of silence, the other tokens, the usage chunk and [DONE]. The
relay's heartbeat is HEARTBEAT_S, so each silence holds two heartbeats; the relay counts them by phase
(before the first byte, between events). Every client runs on 127.0.0.1 only: the tokenizer is the
embedded model's folder, the Hugging Face hub is offline and any other address goes to a dead proxy.
The tools are installed once into loadproof's cache (loadproof.engines.embedded.peers); on a fresh
machine that is about 2 minutes, then this test takes about a minute.

Each file GuideLLM, AIPerf and `vllm bench serve` wrote here is then read by `loadproof import` (docs/import.md), so
the suite imports files written in that very run.

The SDKs of the two APIs whose streams are named events, the openai SDK's Responses stream and the anthropic
SDK's Messages stream, go through the relay in front of the real engine, which serves both:
tests/integration/test_relay_engine.py (an upstream scripted here would only echo what the test expects).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from loadproof.engines.embedded import ensure_engine, ensure_model, paths
from loadproof.engines.embedded.peers import OFFLINE, VLLM_CLI, ensure_node_openai, ensure_peer
from loadproof.ingest.importing import import_results
from tests.integration.test_relay import KEY, RelayProcess, metric, serve_app
from tests.polling import eventually, poll_async

pytestmark = pytest.mark.timeout(900)  # installs included, on a fresh machine

GAP_S = 0.6  # the engine's silence before the first token, and again after it
HEARTBEAT_S = 0.2
TOKENS = 8  # what the upstream sends, whatever max_tokens asks
REQUESTS = 8  # per tool
CONCURRENCY = 4
# no client may reach past 127.0.0.1: the hub is offline and every other address goes to a closed port
SEALED = {
    **OFFLINE,
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "no_proxy": "127.0.0.1,localhost",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


@dataclass
class Upstream:
    url: str = ""
    streams: int = 0  # streamed answers begun
    finished: int = 0  # ... sent to their end
    disconnects: list[float] = field(default_factory=list)  # when a client's leaving reached the upstream


def _chunk(chat: bool, model: str, i: int, finish: str | None) -> bytes:
    common = {"id": "cmpl-relay-test", "created": 1_700_000_000, "model": model}
    if chat:
        delta = {"role": "assistant", "content": " tok"} if i == 0 else {"content": " tok"}
        body = {
            **common,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
    else:
        body = {
            **common,
            "object": "text_completion",
            "choices": [{"index": 0, "text": " tok", "logprobs": None, "finish_reason": finish}],
        }
    body["usage"] = {"prompt_tokens": 16, "completion_tokens": i + 1, "total_tokens": 17 + i}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


@pytest_asyncio.fixture
async def upstream() -> AsyncIterator[Upstream]:
    state = Upstream()

    async def complete(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        chat = request.path.endswith("/chat/completions")
        model = str(body.get("model", "m"))
        if not body.get("stream"):
            await asyncio.sleep(GAP_S)  # sleep: the engine generating a whole answer, the behaviour under test
            usage = {"prompt_tokens": 16, "completion_tokens": TOKENS, "total_tokens": 16 + TOKENS}
            text = " tok" * TOKENS
            choice = (
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                if chat
                else {"index": 0, "text": text, "finish_reason": "length"}
            )
            kind = "chat.completion" if chat else "text_completion"
            return web.json_response(
                {
                    "id": "cmpl-relay-test",
                    "object": kind,
                    "created": 1_700_000_000,
                    "model": model,
                    "choices": [choice],
                    "usage": usage,
                }
            )
        state.streams += 1
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            await _silent(request, GAP_S)  # queueing and prefill
            for i in range(TOKENS):
                await resp.write(_chunk(chat, model, i, "length" if i == TOKENS - 1 else None))
                await _silent(request, GAP_S if i == 0 else 0.01)  # a stall between two tokens
            final = {
                "id": "cmpl-relay-test",
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": 1_700_000_000,
                "model": model,
                "choices": [],
                "usage": {"prompt_tokens": 16, "completion_tokens": TOKENS, "total_tokens": 16 + TOKENS},
            }
            await resp.write(b"data: " + json.dumps(final).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, _Left):
            state.disconnects.append(time.monotonic())
            return resp
        state.finished += 1
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "static", "object": "model", "owned_by": "x"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/v1/models", models)
    state.url, runner = await serve_app(app)
    yield state
    await runner.cleanup()


class _Left(Exception):
    pass


async def _silent(request: web.Request, seconds: float) -> None:
    """Sleep, noticing within 20 ms a client that left (as an engine notices the relay closing)."""
    if await poll_async(lambda: request.transport is None or request.transport.is_closing(), seconds):
        raise _Left


@pytest.fixture(scope="module")
def tools() -> dict[str, Path]:
    """Every client, installed once into loadproof's cache (the first time: minutes, from the registries)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("Node.js and npm are needed for the openai Node SDK")
    # the three installs at once (each under its own lock), before the engine's: on a fresh clone the other test
    # worker is installing the engine for the session's then, and this one would wait on that lock first
    with ThreadPoolExecutor(max_workers=3) as pool:
        installs = {
            "guidellm": pool.submit(ensure_peer, "guidellm"),
            "aiperf": pool.submit(ensure_peer, "aiperf"),
            "node": pool.submit(ensure_node_openai),
        }
        tools = {name: future.result() for name, future in installs.items()}
    ensure_engine()  # `vllm bench serve` is the embedded engine's own
    ensure_model()  # its folder holds the tokenizer every tool needs
    return tools


@pytest.fixture
def relay(upstream: Upstream, tmp_path: Path) -> Iterator[RelayProcess]:
    process = RelayProcess(upstream.url, tmp_path / "relay.log", "--heartbeat-s", str(HEARTBEAT_S))
    yield process
    if process.proc.poll() is None:
        process.stop()


async def heartbeats(url: str) -> tuple[float, float]:
    return (
        await metric(url, 'loadproof_relay_heartbeats_total{phase="before_first_byte"}'),
        await metric(url, 'loadproof_relay_heartbeats_total{phase="between_events"}'),
    )


async def run_tool(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """A tool's command line, run to its end (the upstream in this process keeps serving meanwhile)."""
    cwd.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env or {**os.environ, **SEALED},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 300)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}:\n{text[-3000:]}"
    return text


async def starts_on_this_cpu(argv: list[str], cwd: Path) -> bool:
    """False when the command dies of SIGILL (an instruction this CPU lacks); any other end is True."""
    cwd.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await asyncio.wait_for(proc.wait(), 300) != -signal.SIGILL


@pytest.mark.asyncio
async def test_real_clients_stream_through_heartbeats_before_and_between_tokens(upstream, relay, tools, tmp_path):
    tokenizer = str(paths().model_dir)
    seen = await heartbeats(relay.url)
    timings: dict[str, float] = {}

    async def check(tool: str, streams: int) -> None:
        """Each streamed request had both silences, each silence at least one heartbeat."""
        nonlocal seen
        now = await heartbeats(relay.url)
        waiting, between = now[0] - seen[0], now[1] - seen[1]
        assert waiting >= streams and between >= streams, (tool, waiting, between, streams)
        seen = now

    # -- the openai Python SDK: streams (chat and completions), a non-streamed answer, a wrong key, a
    #    client that leaves mid-stream
    import openai

    t0 = time.monotonic()
    client = openai.AsyncOpenAI(base_url=relay.url + "/v1", api_key=KEY, max_retries=0)

    async def chat_stream() -> str:
        stream = await client.chat.completions.create(
            model="static",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, usage = "", None
        async for chunk in stream:
            text += "".join(c.delta.content or "" for c in chunk.choices)
            usage = chunk.usage or usage
        assert usage is not None and usage.completion_tokens == TOKENS
        return text

    async def completion_stream() -> str:
        stream = await client.completions.create(model="static", prompt="hi", max_tokens=TOKENS, stream=True)
        return "".join([c.choices[0].text async for c in stream if c.choices])

    texts = await asyncio.gather(chat_stream(), chat_stream(), completion_stream(), completion_stream())
    assert texts == [" tok" * TOKENS] * 4
    whole = await client.chat.completions.create(
        model="static", messages=[{"role": "user", "content": "hi"}], max_tokens=TOKENS
    )
    assert whole.choices[0].message.content == " tok" * TOKENS and whole.usage.completion_tokens == TOKENS
    wrong = openai.AsyncOpenAI(base_url=relay.url + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await wrong.completions.create(model="static", prompt="hi", max_tokens=TOKENS)
    await check("openai (Python)", 4)
    stream = await client.completions.create(model="static", prompt="hi", max_tokens=TOKENS, stream=True)
    async for _ in stream:  # the first token, then the client leaves in the stall that follows
        break
    await stream.close()
    left = time.monotonic()
    await eventually(lambda: upstream.disconnects, 1.0, "the upstream stopping for a client that left", every_s=0.01)
    timings["openai (Python) abort reached the upstream, s"] = upstream.disconnects[0] - left
    await client.close()
    await wrong.close()
    timings["openai (Python)"] = time.monotonic() - t0

    # -- curl, as people try an endpoint by hand: a stream (-N, no buffering) and a whole answer
    t0 = time.monotonic()
    curl = shutil.which("curl")
    assert curl, "curl is one of the clients this test runs: install it (apt-get install curl)"
    auth = ["-H", f"Authorization: Bearer {KEY}", "-H", "Content-Type: application/json"]
    body = {"model": "static", "messages": [{"role": "user", "content": "hi"}], "max_tokens": TOKENS}
    out = await run_tool(
        [
            curl,
            "-sS",
            "-N",
            "--fail-with-body",
            *auth,
            "-d",
            json.dumps({**body, "stream": True, "stream_options": {"include_usage": True}}),
            relay.url + "/v1/chat/completions",
        ],
        tmp_path / "curl",
    )
    events = [line[len("data: ") :] for line in out.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]", out[-500:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == " tok" * TOKENS
    assert chunks[-1]["usage"]["completion_tokens"] == TOKENS
    assert all(line == "" or line.startswith("data: ") for line in out.splitlines()), out[:500]  # SSE only
    whole = json.loads(
        await run_tool(
            [curl, "-sS", "--fail-with-body", *auth, "-d", json.dumps(body), relay.url + "/v1/chat/completions"],
            tmp_path / "curl",
        )
    )
    assert whole["choices"][0]["message"]["content"] == " tok" * TOKENS
    denied = await run_tool(
        [
            curl,
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Authorization: Bearer sk-wrong",
            "-H",
            "Content-Type: application/json",
            "-d",
            json.dumps(body),
            relay.url + "/v1/chat/completions",
        ],
        tmp_path / "curl",
    )
    assert denied.strip() == "401", denied
    await check("curl", 1)
    timings["curl"] = time.monotonic() - t0

    # -- the openai Node SDK
    t0 = time.monotonic()
    script = tools["node"] / "relay_client_test.js"
    script.write_text(NODE_CLIENT)
    out = await run_tool(["node", str(script), relay.url + "/v1", KEY, str(REQUESTS)], tmp_path / "node")
    results = json.loads(out.strip().splitlines()[-1])
    assert results == [{"text": " tok" * TOKENS, "tokens": TOKENS}] * REQUESTS, results
    await check("openai (Node)", REQUESTS)
    timings["openai (Node)"] = time.monotonic() - t0

    # -- vllm bench serve, its default backend (completions), as people run it; the engine's own build of
    #    it dies of SIGILL on a CPU without AVX-512 before it reads an argument (its --help too), so there
    #    it is left out, and the test says so at its end, once every other client has passed
    vllm_cli = [str(paths().python), "-c", VLLM_CLI, "bench", "serve"]
    vllm_runs = await starts_on_this_cpu(vllm_cli + ["--help"], tmp_path / "vllm-help")
    if vllm_runs:
        t0 = time.monotonic()
        work = tmp_path / "vllm"
        await run_tool(
            [
                *vllm_cli,
                "--base-url",
                relay.url,
                "--model",
                "static",
                "--tokenizer",
                tokenizer,
                "--dataset-name",
                "random",
                "--random-input-len",
                "16",
                "--random-output-len",
                str(TOKENS),
                "--num-prompts",
                str(REQUESTS),
                "--max-concurrency",
                str(CONCURRENCY),
                "--request-rate",
                "inf",
                "--disable-tqdm",
                "--save-result",
                "--save-detailed",
                "--result-dir",
                str(work),
                "--result-filename",
                "result.json",
            ],
            work,
            {**os.environ, **SEALED, "OPENAI_API_KEY": KEY},
        )
        result = json.loads((work / "result.json").read_text())
        errors = [e for e in result.get("errors", []) if e]
        assert (result["completed"], result.get("failed", 0)) == (REQUESTS, 0), errors[:1]
        assert all(n == TOKENS for n in result["output_lens"])
        assert imported_requests(work / "result.json", tmp_path / "imported") == REQUESTS  # loadproof import reads it
        await check("vllm bench serve", REQUESTS)
        timings["vllm bench serve"] = time.monotonic() - t0

    # -- GuideLLM
    t0 = time.monotonic()
    work = tmp_path / "guidellm"
    await run_tool(
        [
            str(tools["guidellm"]),
            "run",
            "--backend",
            f"kind=openai_http,target={relay.url},model=static,api_key={KEY},"
            "request_format=/v1/chat/completions,validate_backend=false",
            "--tokenizer",
            f"kind=huggingface_auto,model={tokenizer}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=16,output_tokens={TOKENS}",
            "--profile",
            f"kind=concurrent,streams={CONCURRENCY}",
            "--constraint",
            f"kind=max_requests,count={REQUESTS}",
            "--output",
            f"kind=json,path={work / 'result.json'}",
            "--disable-console-interactive",
        ],
        work,
    )
    bench = json.loads((work / "result.json").read_text())["benchmarks"][0]
    errored = bench["requests"].get("errored") or []
    assert (len(bench["requests"]["successful"]), len(errored)) == (REQUESTS, 0), errored[:1]
    assert all(r["output_tokens"] == TOKENS for r in bench["requests"]["successful"])
    assert imported_requests(work / "result.json", tmp_path / "imported") == REQUESTS  # loadproof import reads it
    await check("GuideLLM", REQUESTS)
    timings["GuideLLM"] = time.monotonic() - t0

    # -- AIPerf (without HF_HUB_OFFLINE, with which 0.13.0 refuses a tokenizer folder: see benchmarks/peers.py;
    #    the dead proxy still keeps it off the network)
    t0 = time.monotonic()
    work = tmp_path / "aiperf"
    env = {k: v for k, v in {**os.environ, **SEALED}.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    await run_tool(
        [
            str(tools["aiperf"]),
            "profile",
            "--model",
            "static",
            "--url",
            relay.url,
            "--api-key",
            KEY,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--concurrency",
            str(CONCURRENCY),
            "--request-count",
            str(REQUESTS),
            "--tokenizer",
            tokenizer,
            "--synthetic-input-tokens-mean",
            "16",
            "--output-tokens-mean",
            str(TOKENS),
            "--artifact-dir",
            str(work),
            "--ui-type",
            "none",
            "--no-server-metrics",
            "--no-gpu-telemetry",
            "--random-seed",
            "1",
            "--workers-max",
            "1",
        ],
        work,
        env,
    )
    data = json.loads((work / "profile_export_aiperf.json").read_text())
    assert data["request_count"]["avg"] == REQUESTS and not data.get("error_summary"), data.get("error_summary")
    assert data["output_sequence_length"]["avg"] == TOKENS
    assert imported_requests(work, tmp_path / "imported") == REQUESTS  # loadproof import reads it, records and all
    await check("AIPerf", REQUESTS)
    timings["AIPerf"] = time.monotonic() - t0

    assert await metric(relay.url, "loadproof_relay_in_flight") == 0
    rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
    # besides the wrong keys (the SDK's, curl's) and the client that left, only `vllm bench serve`'s probe of vLLM's
    # /tokenize, which the relay forwards to the engine behind the API's key, and `vllm bench serve` sends it without one
    assert sorted((r["outcome"], r["path"]) for r in rows if r["outcome"] != "ok") == sorted(
        [
            ("client_disconnect", "/v1/completions"),
            *([("unauthorized", "/tokenize")] if vllm_runs else []),
            ("unauthorized", "/v1/chat/completions"),
            ("unauthorized", "/v1/completions"),
        ]
    ), rows
    print("seconds per client:", json.dumps({k: round(v, 2) for k, v in timings.items()}), file=sys.stderr)
    if not vllm_runs:
        pytest.skip(
            "every other client passed; vllm bench serve (the engine's own vLLM build) dies of SIGILL on "
            "this CPU, which lacks an instruction it needs (AVX-512), so it was not run"
        )


def imported_requests(path: Path, out: Path) -> int:
    """The successful requests of the run `loadproof import` makes of what a tool wrote in this very test."""
    (done,) = import_results(path, out)
    return sum(r.ok for r in done.report.run.records)


NODE_CLIENT = r"""
// The openai Node SDK through the relay: N streamed requests at once, half chat, half completions.
const OpenAI = require('openai');
const [baseURL, apiKey, n] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
async function one(i) {
  let text = '', tokens = null;
  if (i % 2) {
    const stream = await client.chat.completions.create({ model: 'static', messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 8, stream: true, stream_options: { include_usage: true } });
    for await (const c of stream) {
      for (const choice of c.choices) text += choice.delta.content || '';
      if (c.usage) tokens = c.usage.completion_tokens;
    }
  } else {
    const stream = await client.completions.create({ model: 'static', prompt: 'hi', max_tokens: 8, stream: true });
    for await (const c of stream) {
      for (const choice of c.choices) text += choice.text;
      if (c.usage) tokens = c.usage.completion_tokens;
    }
  }
  return { text, tokens };
}
Promise.all(Array.from({ length: Number(n) }, (_, i) => one(i)))
  .then((results) => console.log(JSON.stringify(results)))
  .catch((err) => { console.error('FAILED', err.status || '', err.message); process.exit(1); });
"""
