"""Shared fixtures: a scriptable SSE server on 127.0.0.1 (real HTTP, real sockets); Hypothesis profiles.

Property tests are deterministic by default (profile `ci`: derandomized, no example database), so
`pytest` gives the same verdict on every machine and every run. `HYPOTHESIS_PROFILE=fuzz` explores:
new random examples on each run, FUZZ_FACTOR times as many per test (docs/publish-and-verify.md,
"Testing the sanitizer"):

    HYPOTHESIS_PROFILE=fuzz scripts/in-venv pytest -q -p no:cacheprovider tests/unit/publish
"""

from __future__ import annotations

import ast
import asyncio
import compileall
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web
from hypothesis import settings

FUZZ_FACTOR = 10  # the fuzz profile runs this many times the examples each test asks for
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("fuzz", derandomize=False)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)  # before any test module is imported: their @settings inherit from it


@dataclass
class Script:
    """What the server does for one request: status, then pieces of body with pauses between."""

    status: int = 200
    pieces: list[bytes] = field(default_factory=list)
    pause_s: float = 0.0
    drop_after: int | None = None  # close the connection after this many pieces, mid-stream
    hang_after: int | None = None  # stop sending (but keep the connection) after this many pieces
    silence_first_s: float = 0.0  # headers at once, then nothing for this long (queueing, prefill)


@dataclass
class SSEServer:
    url: str
    scripts: list[Script]
    bodies: list[bytes]
    disconnects: list[str]
    headers: list[dict[str, str]] = field(default_factory=list)  # each request's, as the server received them


@pytest_asyncio.fixture
async def sse_server() -> AsyncIterator[Callable[[list[Script]], SSEServer]]:
    runners: list[web.AppRunner] = []

    async def start(scripts: list[Script]) -> SSEServer:
        queue = list(scripts)
        state = SSEServer(url="", scripts=scripts, bodies=[], disconnects=[])

        async def handle(request: web.Request) -> web.StreamResponse:
            state.bodies.append(await request.read())
            state.headers.append(dict(request.headers))
            script = queue.pop(0) if len(queue) > 1 else queue[0]
            if script.status != 200:
                return web.Response(status=script.status, body=b"".join(script.pieces), content_type="application/json")
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            try:
                if script.silence_first_s:
                    await asyncio.sleep(script.silence_first_s)  # sleep: the script's silence, as scripted
                for i, piece in enumerate(script.pieces):
                    if script.drop_after is not None and i == script.drop_after:
                        request.transport.close()
                        return resp
                    if script.hang_after is not None and i == script.hang_after:
                        # silent but connected, as a hung engine is; notice when the client leaves
                        while request.transport is not None and not request.transport.is_closing():
                            await asyncio.sleep(0.02)  # sleep: hung until the client leaves, however long
                        state.disconnects.append(request.path)
                        return resp
                    await resp.write(piece)
                    if script.pause_s:
                        await asyncio.sleep(script.pause_s)  # sleep: the script's pause, as scripted
                await resp.write_eof()
            except (ConnectionResetError, asyncio.CancelledError):
                state.disconnects.append(request.path)
                raise
            return resp

        app = web.Application()
        app.router.add_post("/v1/completions", handle)
        app.router.add_post("/v1/chat/completions", handle)
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]  # the one site's (host, port)
        state.url = f"http://127.0.0.1:{port}"
        return state

    yield start
    for runner in runners:
        await runner.cleanup()


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the source and the tests once, before any worker starts: where PYTHONDONTWRITEBYTECODE is
    set (CI images often set it) no import caches its module, so each of the suite's hundreds of `python -m
    loadproof` processes compiled every module it imports again (0.8 s to import the CLI without caches, 0.6 s
    with them). compileall writes the caches whatever that variable says; git ignores them."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller compiled already
        return
    for tree in ("src", "tests"):
        compileall.compile_dir(Path(__file__).parents[1] / tree, quiet=1, workers=1)


# A test's timeout counts its fixtures' set-up. The first test on a worker that takes an engine fixture (below:
# the session engine, the VLM, the speech engine, the fleet) also waits for that engine to come up, which on a
# fresh machine includes installing the engine and preparing its model: the session engine took 279 s in a fresh
# clone, and its first test, whose own timeout is 300 s, timed out. Such a test's timeout is its own plus this;
# the fixture bounds the start itself (integration/conftest.py START_TIMEOUT_S).
ENGINE_START_ALLOWANCE_S = 900


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    scaled: set[int] = set()
    for item in items:
        if item.get_closest_marker("asyncio") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(60))
        if set(SESSION_ENGINES) & set(getattr(item, "fixturenames", ())):
            marker = item.get_closest_marker("timeout")
            own = float(marker.args[0]) if marker is not None and marker.args else float(config.getini("timeout"))
            item.add_marker(pytest.mark.timeout(own + ENGINE_START_ALLOWANCE_S), append=False)
        if PROFILE == "fuzz":
            _more_examples(getattr(item, "obj", None), scaled)


def _more_examples(test: object, scaled: set[int]) -> None:
    """FUZZ_FACTOR times the examples a Hypothesis test asks for (its own @settings count included), once
    per test function (a parametrized test is one function). Hypothesis reads a test's settings from this
    attribute each time the test runs."""
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is None or id(test) in scaled:
        return
    scaled.add(id(test))
    more = settings(current, max_examples=current.max_examples * FUZZ_FACTOR)
    test._hypothesis_internal_use_settings = more  # type: ignore[attr-defined]  # Hypothesis's own attribute on the test function, read above


# -- two workers (pyproject.toml: -n 2) --------------------------------------------------------------------------
INTEGRATION = Path(__file__).parent / "integration"


# Every module that runs a real engine goes to one worker, one module after another, beside the session engine
# (about 9 GB with its API process); the other worker runs the unit tests and the simulator's modules. Two such
# modules on two workers took the machine past 24 GiB: the kernel killed the session engine's worker with the
# fleet's two replicas (10 GB) and the vision engine up (54faa1b), and again with the prefill/decode pair's two and
# a long-context module's own engine up (e0cb75c). So at most the session engine and one other module's engines
# (the fleet's, 10 GB) are up at once.
ENGINES = "real-engines"
# each engine fixture (a module that takes one runs where that engine is)
SESSION_ENGINES = {"engine": ENGINES, "fleet": ENGINES, "vlm_engine": ENGINES, "asr_engine": ENGINES}
# modules that start real engines of their own (module fixtures, `start_serve`, `small_embedded`)
PINNED = {
    name: ENGINES
    for name in (
        "test_pd_engine.py",
        "test_embeddings_engine.py",
        "test_lora_engine.py",
        "test_reasoning_engine.py",
        "test_replay_small_kv.py",
        "test_spec_decode_engine.py",
        "test_supervisor.py",
    )
}


def _engine_group(module: Path) -> str | None:
    """The group of a test module that asks for a session engine (a test or fixture of it takes `engine`, the
    embedded default, or `vlm_engine` / `asr_engine`, the packaged embedded-vlm / embedded-asr, or `fleet`, the
    packaged embedded-fleet); None otherwise."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    taken = {
        a.arg
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for a in node.args.args
    }
    return next((group for fixture, group in SESSION_ENGINES.items() if fixture in taken), None)


ENGINE_GROUPS = {
    f"tests/integration/{m.name}": group
    for m in sorted(INTEGRATION.glob("test_*.py"))
    if (group := _engine_group(m) or PINNED.get(m.name)) is not None
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Which tests one worker runs together: every module that runs a real engine on one worker (`ENGINES`), so
    the session engine serves all that take it (a worker's session fixtures are its own, so the other worker would
    start a second) and at most one other module's engines are up beside it; each other integration module whole,
    so an engine or simulator its module starts (a module-scoped fixture) starts once; unit tests one by one,
    wherever a worker is free. (xdist's own `--dist loadgroup` reads groups from node ids, which pytest 9.2 no
    longer lets a plugin rename.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByEngine(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if not module.startswith("tests/integration/"):
                return nodeid
            return ENGINE_GROUPS.get(module, module)

    return ByEngine(config, log)
