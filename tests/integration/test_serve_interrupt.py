"""Nothing of an engine's process group outlives a failed start, a stop, or Ctrl-C on `loadproof serve`.

Real processes throughout. The engine is a shell that leaves a child behind (`sh -c 'sleep 300 & ...'`,
as vLLM's API server leaves an engine core), or `loadproof sim` through a profile (`engine = "sim"`), a
real HTTP server started, probed and stopped as vLLM is, in a second. Ctrl-C is SIGINT sent to the
process group of `loadproof serve`, as a terminal sends it to its foreground job; the engine runs in a
group of its own, so only `serve` can stop it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loadproof.engines import engines
from loadproof.engines.base import LaunchCommand
from loadproof.engines.process import EngineProcess, free_port
from loadproof.errors import EngineStartCancelled, EngineStartError
from loadproof.supervisor import FAILED, STOPPED, Supervisor, SupervisorPolicy
from tests.integration.conftest import _group_members
from tests.integration.sim_process import requests_served
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(120)

KEY = "sk-serve-interrupt-5527"
EXIT_WITHIN_S = 20.0  # Ctrl-C to exit: the sim stops on SIGTERM at once; the bound is the supervisor's slack


def alive(pid: int) -> bool:
    """A live process (a zombie is gone, only not yet reaped by its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def gone_within(pids: list[int], pgid: int, within_s: float) -> None:
    wait_until(
        lambda: not any(alive(p) for p in pids) and not _group_members({pgid}),
        within_s,
        lambda: f"left behind: {[p for p in pids if alive(p)]}, group {_group_members({pgid})}",
        every_s=0.05,
    )


# -- the engine process and the supervisor, with a shell that leaves a child behind ------------------------

STARTED_GROUPS: list[int] = []


@pytest.fixture(autouse=True)
def no_leftovers() -> Any:
    """Whatever a test asserts, a regression must not leave `sleep 300`s on the machine."""
    yield
    while STARTED_GROUPS:
        try:
            os.killpg(STARTED_GROUPS.pop(), signal.SIGKILL)
        except ProcessLookupError:
            pass


def shell_engine(tmp_path: Path, then: str) -> EngineProcess:
    """An engine that starts a child (`sleep 300`, its pid in child.pid), then runs `then` (`exit 1`: it dies
    before it is ready, leaving the child; `wait`: it never becomes ready)."""
    script = f"sleep 300 & echo $! > {tmp_path}/child.pid; {then}"
    engine = EngineProcess(
        engines.get("sim"),
        LaunchCommand(argv=["sh", "-c", script], env={}),
        "127.0.0.1",
        free_port(),
        tmp_path / "engine.log",
    )
    engine.start()
    assert engine.pid is not None
    STARTED_GROUPS.append(engine.pid)
    return engine


def shell_launcher(tmp_path: Path, then: str) -> tuple[Callable[[], EngineProcess], list[int]]:
    """A supervisor's launch of `shell_engine`, and the process groups it started."""
    pgids: list[int] = []

    def launch() -> EngineProcess:
        engine = shell_engine(tmp_path, then)
        pgids.append(engine.pid or 0)
        return engine

    return launch, pgids


def child_pid(tmp_path: Path) -> int:
    path = tmp_path / "child.pid"
    return int(wait_until(lambda: path.exists() and path.read_text().strip(), 10, "the shell starting its child"))


@pytest.mark.parametrize("way_out", ["exit", "timeout", "cancel", "ctrl_c"])
def test_every_way_out_of_the_readiness_wait_stops_the_whole_group(tmp_path, way_out):
    engine = shell_engine(tmp_path, "exit 1" if way_out == "exit" else "wait")
    pgid = engine.pid
    assert pgid is not None
    child = child_pid(tmp_path)
    cancel = threading.Event()
    status = None
    if way_out == "cancel":
        threading.Timer(0.5, cancel.set).start()
    if way_out == "ctrl_c":
        began = time.monotonic()

        def status(line: str) -> None:  # Ctrl-C lands in the wait, as it does in `loadproof demo`
            if time.monotonic() - began > 0.5:
                raise KeyboardInterrupt

    expected: type[BaseException] = {
        "exit": EngineStartError,
        "timeout": EngineStartError,
        "cancel": EngineStartCancelled,
        "ctrl_c": KeyboardInterrupt,
    }[way_out]
    began_wait = time.monotonic()
    with pytest.raises(expected) as raised:
        engine.wait_ready("tiny", timeout_s=1.0 if way_out == "timeout" else 60.0, status=status, cancel=cancel)
    if way_out == "exit":
        assert "exited with code 1 before it was ready" in str(raised.value)
    assert time.monotonic() - began_wait < 10
    # gone by the time wait_ready raised, not eventually
    assert not alive(child), f"the engine's child {child} outlived the failed start ({way_out})"
    assert not _group_members({pgid})


def test_after_start_failed_nothing_of_the_group_is_alive(tmp_path):
    """The issue's reproduction: `sh -c 'sleep 300 & exit 1'` under the supervisor; after FAILED, the sleep
    was still alive (it kept vLLM's port and GPU memory while a restart began)."""
    launch, pgids = shell_launcher(tmp_path, "exit 1")
    events: list[dict[str, Any]] = []
    children: list[int] = []

    def on_event(row: dict[str, Any]) -> None:
        events.append(row)
        if row["kind"] == "start_failed":  # the moment a restart would begin
            child = child_pid(tmp_path)
            children.append(child)
            assert not alive(child) and not _group_members({pgids[-1]}), "the old engine's child is still up"
            (tmp_path / "child.pid").unlink()

    supervisor = Supervisor(
        launch,
        served_name="tiny",
        gpus_needed=0,
        ready_timeout_s=30,
        events_path=tmp_path / "events.jsonl",
        on_event=on_event,
        policy=SupervisorPolicy(max_restarts=1, backoff_initial_s=0.1, jitter=0.0),
    )
    assert supervisor.run() == FAILED
    assert [e["kind"] for e in events] == ["start", "start_failed", "restart", "start", "start_failed", "give_up"]
    assert len(children) == 2 and not any(alive(c) for c in children)


def test_stop_interrupts_the_readiness_wait_within_a_second(tmp_path):
    """stop() used to be ignored until the ready timeout (900 s by default) passed."""
    launch, pgids = shell_launcher(tmp_path, "wait")
    supervisor = Supervisor(
        launch, served_name="tiny", gpus_needed=0, ready_timeout_s=900, events_path=tmp_path / "events.jsonl"
    )
    outcome: list[str] = []
    thread = threading.Thread(target=lambda: outcome.append(supervisor.run()), daemon=True)
    thread.start()
    child = child_pid(tmp_path)
    wait_until(lambda: "start" in (tmp_path / "events.jsonl").read_text(), 10, "the supervisor's start event")
    time.sleep(0.3)  # sleep: the scenario, not a settle: stop() comes while the wait is well under way
    stopped_at = time.monotonic()
    supervisor.stop()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the supervisor ignored stop() while the engine was starting"
    assert time.monotonic() - stopped_at < 1.5
    assert outcome == [STOPPED]
    assert not alive(child) and not _group_members(set(pgids))
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert kinds == ["start", "stopped"]


# -- `loadproof serve PROFILE [--relay]` with the simulator as its engine, interrupted -----------------------


def sim_profile(tmp_path: Path, *, load_s: float = 0.0, extra_args: tuple[str, ...] = ()) -> Path:
    sim_config = tmp_path / "sim.json"
    sim_config.write_text(json.dumps({"load_s": load_s}))
    profile = tmp_path / "sim-profile.toml"
    profile.write_text(
        f'name = "sim"\nengine = "sim"\n[model]\npath = "{sim_config}"\nserved_name = "tiny"\n'
        f'max_model_len = 8192\n[serving]\nendpoint = "completions"\nready_timeout_s = 120\n'
        f"extra_args = {json.dumps(list(extra_args))}\n"
    )
    return profile


class Serve:
    """`loadproof serve` as a user starts it from a terminal (its own process group, as a foreground job)."""

    def __init__(self, tmp_path: Path, target: Path | str, *args: str, relay: bool = False) -> None:
        self.out = tmp_path / "runs"
        self.relay_port = free_port() if relay else None
        argv = [sys.executable, "-m", "loadproof", "serve", str(target), "--out", str(self.out), *args]
        if self.relay_port is not None:
            argv += ["--relay", "--relay-port", str(self.relay_port)]
        self.stdout_path, self.stderr_path = tmp_path / "serve.out", tmp_path / "serve.err"
        env = dict(os.environ)
        if target != "--embedded":  # the embedded engine lives in loadproof's cache; the rest logs in the test's
            env["LOADPROOF_HOME"] = str(tmp_path / "home")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, start_new_session=True
            )

    def output(self) -> str:
        return self.stdout_path.read_text() + self.stderr_path.read_text()

    def events(self) -> list[dict[str, Any]]:
        paths = list(self.out.glob("serve-*/events.jsonl"))
        return [json.loads(line) for line in paths[0].read_text().splitlines()] if paths else []

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events()]

    def wait_for(self, kind: str, within_s: float = 60.0) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            events = [e for e in self.events() if e["kind"] == kind]
            assert events or self.proc.poll() is None, f"serve ended before {kind!r}:\n{self.output()[-3000:]}"
            return events[-1] if events else None

        return wait_until(
            found, within_s, lambda: f"no {kind!r} event: {self.kinds()}\n{self.output()[-3000:]}", every_s=0.05
        )

    def wait_serving(self, within_s: float = 60.0) -> str:
        """The engine's URL, once `serve` printed it (the relay stops answering 503 before that line)."""

        def serving() -> bool:
            said = "serving tiny at" in self.stdout_path.read_text()
            assert said or self.proc.poll() is None, f"serve ended before it served:\n{self.output()[-3000:]}"
            return said

        wait_until(serving, within_s, lambda: f"not serving: {self.kinds()}\n{self.output()[-3000:]}", every_s=0.05)
        return self.wait_for("ready")["url"]

    def ctrl_c(self) -> float:
        os.killpg(self.proc.pid, signal.SIGINT)
        return time.monotonic()

    def wait_exit(self, within_s: float) -> int:
        try:
            return self.proc.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"serve still running {within_s:g} s after Ctrl-C:\n{self.output()[-3000:]}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for event in self.events():  # whatever the test did, leave no engine behind
            if event["kind"] == "start":
                try:
                    os.killpg(event["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture
def serve(tmp_path):
    started: list[Serve] = []

    def start(target: Path | str, *args: str, relay: bool = False) -> Serve:
        run = Serve(tmp_path, target, *args, relay=relay)
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill()


def port_closed(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) != 0


def stream(url: str, key: str | None = None) -> tuple[threading.Thread, list[bytes]]:
    """A long streaming completion, read in a thread; returns once its first chunks arrived."""
    body = json.dumps(
        {"model": "tiny", "prompt": "Tell me everything.", "max_tokens": 4000, "stream": True, "ignore_eos": True}
    ).encode()
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    resp = urllib.request.urlopen(
        urllib.request.Request(url + "/v1/completions", data=body, headers=headers), timeout=30
    )
    chunks: list[bytes] = []

    def read() -> None:
        try:
            for line in resp:
                chunks.append(line)
        except OSError:
            chunks.append(b"<connection lost>")
        finally:
            resp.close()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def started() -> bool:
        reading = reader.is_alive()  # before the count: a reader that had ended has all its chunks counted
        if sum(c.startswith(b"data: {") for c in chunks) >= 5:
            return True
        assert reading, f"the stream ended before it started: {chunks[-3:]}"
        return False

    wait_until(started, 20, lambda: f"the stream starting: {chunks[-3:]}")
    return reader, chunks


def status_of(url: str) -> int | None:
    """The HTTP status a GET of `url` gets; None while nothing listens there."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code
    except OSError:
        return None


def assert_all_gone(run: Serve, interrupted_at: float) -> None:
    code = run.wait_exit(EXIT_WITHIN_S)
    took = time.monotonic() - interrupted_at
    assert code == 130, f"exit {code}:\n{run.output()[-3000:]}"
    starts = [e for e in run.events() if e["kind"] == "start"]
    assert starts, run.kinds()
    for start in starts:
        assert not alive(start["pid"]) and not _group_members({start["pid"]}), (
            f"engine group {start['pid']} left after Ctrl-C: {_group_members({start['pid']})}"
        )
    if run.relay_port is not None:
        assert port_closed(run.relay_port), "the relay still listens"
    assert run.kinds()[-1] == "stopped"
    assert took < EXIT_WITHIN_S


@pytest.mark.parametrize("relay", [False, True], ids=["serve", "serve-relay"])
def test_ctrl_c_during_start_up_leaves_nothing(tmp_path, serve, relay):
    run = serve(sim_profile(tmp_path, load_s=120), "--probe-interval-s", "1", relay=relay)
    start = run.wait_for("start")
    wait_until(
        lambda: "loading for" in Path(start["log"]).read_text(errors="replace"), 30, "the engine says it is loading"
    )
    assert alive(start["pid"]) and run.kinds() == ["start"]  # loading, not ready
    if relay:
        assert run.relay_port is not None
        code = wait_until(lambda: status_of(f"http://127.0.0.1:{run.relay_port}/v1/models"), 30, "the relay answers")
        assert code == 503  # the relay is up, the engine not yet
    assert_all_gone(run, run.ctrl_c())
    assert run.kinds() == ["start", "stopped"]


@pytest.mark.parametrize("relay", [False, True], ids=["serve", "serve-relay"])
def test_ctrl_c_while_a_request_streams_leaves_nothing(tmp_path, serve, relay):
    run = serve(sim_profile(tmp_path), "--probe-interval-s", "1", relay=relay)
    url = run.wait_serving()
    reader, chunks = stream(f"http://127.0.0.1:{run.relay_port}" if relay else url)
    assert_all_gone(run, run.ctrl_c())
    reader.join(timeout=10)
    assert not reader.is_alive(), "the client's stream was left hanging"
    if relay:  # the relay ended the stream with an explicit error, not silence
        assert any(b'"error"' in c for c in chunks[-3:]), chunks[-3:]


def test_ctrl_c_during_the_restart_backoff_leaves_nothing(tmp_path, serve):
    run = serve(sim_profile(tmp_path, extra_args=("--fault", "no-such-fault")), "--backoff-s", "60")
    run.wait_for("restart")
    assert_all_gone(run, run.ctrl_c())
    assert run.kinds() == ["start", "start_failed", "restart", "stopped"]


def test_an_engine_started_with_an_api_key_becomes_ready_and_is_probed_with_it(tmp_path, serve):
    """Readiness and liveness used to go without the key: such an engine never became ready."""
    run = serve(sim_profile(tmp_path, extra_args=("--api-key", KEY)), "--probe-interval-s", "0.5", relay=True)
    url = run.wait_serving(within_s=60)
    with pytest.raises(urllib.error.HTTPError) as refused:  # the engine does demand the key
        urllib.request.urlopen(url + "/v1/models", timeout=10)
    assert refused.value.code == 401
    refused.value.close()
    # a few liveness probes (one a 0.5 s, each a one-token completion), answered: the key went with them
    wait_until(lambda: requests_served(url) >= 3, 30, "three probes answered")
    assert "probe_failed" not in run.kinds() and "restart" not in run.kinds()
    reader, chunks = stream(f"http://127.0.0.1:{run.relay_port}")  # the relay reaches the engine with it too
    assert_all_gone(run, run.ctrl_c())
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "sim-profile.toml"]
    assert any(p.name.startswith("engine-") for p in written)  # the engine's log is among them
    leaked = [str(p) for p in written if KEY in p.read_text(errors="replace")]
    assert not leaked, f"the API key was logged: {leaked}"


@pytest.mark.engine
@pytest.mark.timeout(900)  # an install on a fresh machine included
def test_ctrl_c_while_the_embedded_engine_starts_leaves_nothing(serve):
    """The real vLLM: interrupted once its engine core has been forked (two processes in the group), before
    it serves; the API server and the core both go. (vLLM does not act on SIGTERM while its core starts:
    the group goes at the SIGKILL after the 20 s grace, well within the supervisor's bound.)"""
    from loadproof.engines.embedded import ensure_engine, ensure_model

    # installed first (on a fresh machine the other test worker may be installing it: this waits for its lock),
    # so the interrupt lands while the engine starts, not while it installs
    ensure_engine()
    ensure_model()
    run = serve("--embedded", "--eager")
    pgid = run.wait_for("start", within_s=60)["pid"]

    def forked() -> bool:
        done = len(_group_members({pgid})) >= 2 or "ready" in run.kinds()
        assert done or alive(pgid), f"the engine ended before its core forked: {run.output()[-2000:]}"
        return done

    wait_until(forked, 180, lambda: f"the engine core forked: {run.output()[-2000:]}", every_s=0.2)
    members = _group_members({pgid})
    interrupted = run.ctrl_c()
    code = run.wait_exit(60)
    assert code == 130, run.output()[-2000:]
    assert time.monotonic() - interrupted < 60
    assert not [m for m in members if alive(m)] and not _group_members({pgid}), "vLLM processes left behind"
    assert run.kinds()[-1] == "stopped"
