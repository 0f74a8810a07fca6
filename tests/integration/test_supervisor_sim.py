"""The supervisor around `loadproof sim` as its engine: crash, hang and a crash loop, in seconds.

The same policy code as around the real engine (test_supervisor.py), with faults the simulator makes on
demand: a crash (exit code 13) and a hang (/health 200, no token) set through POST /sim/faults, and an
engine that dies on its first completion (`--fault crash`): the first liveness probe, every start.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loadproof.engines import engines
from loadproof.engines.base import LaunchCommand
from loadproof.engines.process import EngineProcess, free_port
from loadproof.supervisor import FAILED, READY, STOPPED, Supervisor, SupervisorPolicy
from tests.integration.sim_process import requests_served
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(90)

# small but not tight: a probe of one token takes ~25 ms on the simulator, a start about a second
POLICY = SupervisorPolicy(
    probe_interval_s=0.5,
    probe_timeout_s=2.0,
    max_probe_failures=2,
    max_restarts=1,
    restart_window_s=600,
    stable_after_s=600,
    backoff_initial_s=0.2,
    backoff_max_s=1.0,
    jitter=0.0,
)


@dataclass
class Supervised:
    supervisor: Supervisor
    thread: threading.Thread
    port: int
    outcome: list[str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        path = self.supervisor.events_path
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events()]

    def wait_for(self, done: Callable[[list[str]], bool], within_s: float) -> list[str]:
        def kinds() -> list[str] | None:
            kinds = self.kinds()
            return kinds if done(kinds) else None

        return wait_until(kinds, within_s, lambda: f"supervisor events so far: {self.kinds()}", every_s=0.05)

    def set_faults(self, *active: str) -> None:
        request = urllib.request.Request(
            self.url + "/sim/faults",
            data=json.dumps({"active": list(active)}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200

    def finish(self, within_s: float = 30.0) -> str:
        self.thread.join(timeout=within_s)
        assert not self.thread.is_alive(), f"the supervisor did not end: {self.kinds()}"
        return self.outcome[0]


@pytest.fixture
def supervise(tmp_path: Path) -> Iterator[Callable[..., Supervised]]:
    started: list[Supervised] = []

    def start(*sim_args: str, policy: SupervisorPolicy = POLICY) -> Supervised:
        port = free_port()  # one port for every restart, as `loadproof serve` keeps it
        launches = 0

        def launch() -> EngineProcess:
            nonlocal launches
            launches += 1
            argv = [sys.executable, "-m", "loadproof", "sim", "--port", str(port), *sim_args]
            engine = EngineProcess(
                engines.get("sim"),
                LaunchCommand(argv=argv, env={}),
                "127.0.0.1",
                port,
                tmp_path / f"sim-{launches}.log",
            )
            engine.start()
            return engine

        supervisor = Supervisor(
            launch,
            served_name="sim",
            gpus_needed=0,
            ready_timeout_s=30,
            events_path=tmp_path / "events.jsonl",
            policy=policy,
        )
        outcome: list[str] = []
        thread = threading.Thread(target=lambda: outcome.append(supervisor.run()), daemon=True)
        handle = Supervised(supervisor, thread, port, outcome)
        started.append(handle)
        thread.start()
        return handle

    yield start
    for handle in started:
        handle.supervisor.stop()
        handle.thread.join(timeout=30)
        assert handle.supervisor.engine is None or not handle.supervisor.engine.alive()


def test_a_crash_is_seen_as_an_exit_with_its_code_and_the_engine_restarted(supervise):
    run = supervise()
    run.wait_for(lambda k: "ready" in k, within_s=40)
    first_pid = run.events()[0]["pid"]
    run.set_faults("crash")
    kinds = run.wait_for(lambda k: k.count("ready") == 2, within_s=40)
    run.supervisor.stop()
    assert run.finish() == STOPPED
    events = run.events()
    assert [k for k in kinds if k != "probe_failed"] == ["start", "ready", "exit", "restart", "start", "ready"]
    (exit_event,) = [e for e in events if e["kind"] == "exit"]
    assert exit_event["code"] == 13
    second_start = [e for e in events if e["kind"] == "start"][1]
    assert second_start["pid"] != first_pid
    assert events[-1]["kind"] == "stopped"


def test_an_exit_is_seen_within_seconds_when_probes_are_an_hour_apart(supervise):
    """A capacity run sets the probe to once an hour (it is a real request); on two H200s an engine died
    mid-run then and the supervisor, which looked at the process only when it probed, did not see it."""
    run = supervise(policy=dataclasses.replace(POLICY, probe_interval_s=3600.0))
    run.wait_for(lambda k: "ready" in k, within_s=40)
    run.set_faults("crash")  # the next completion kills the engine; the probe will not send one for an hour
    body = json.dumps({"model": "sim", "prompt": "hello", "max_tokens": 1}).encode()
    request = urllib.request.Request(
        run.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with pytest.raises(OSError):
        urllib.request.urlopen(request, timeout=10).read()
    died = time.monotonic()
    kinds = run.wait_for(lambda k: "exit" in k, within_s=10)
    assert time.monotonic() - died < 5
    assert kinds[:3] == ["start", "ready", "exit"]
    assert [e["code"] for e in run.events() if e["kind"] == "exit"] == [13]


def test_a_hang_behind_a_healthy_health_check_is_caught_by_the_probe_and_restarted(supervise):
    run = supervise()
    run.wait_for(lambda k: "ready" in k, within_s=40)
    hung_pid = run.events()[0]["pid"]
    run.set_faults("hang")
    with urllib.request.urlopen(run.url + "/health", timeout=5) as resp:
        assert resp.status == 200  # /health says fine while nothing can be generated
    kinds = run.wait_for(lambda k: k.count("ready") == 2, within_s=60)
    assert run.supervisor.state == READY
    wait_until(
        lambda: requests_served(run.url) >= 2,
        10 * POLICY.probe_interval_s + 5,
        "the restarted engine answered two probes",
    )
    run.supervisor.stop()
    assert run.finish() == STOPPED
    assert kinds == ["start", "ready", "probe_failed", "probe_failed", "restart", "start", "ready"]
    events = run.events()
    failed = [e for e in events if e["kind"] == "probe_failed"]
    assert all(e["outcome"] == "timeout" for e in failed) and [e["consecutive"] for e in failed] == [1, 2]
    assert not Path(f"/proc/{hung_pid}").exists()  # the hung engine was stopped, not left behind
    (restart,) = [e for e in events if e["kind"] == "restart"]
    assert restart["reason"].startswith("liveness probe failed 2 times in a row")
    assert run.kinds() == kinds + ["stopped"]  # no probe failed after the restart


def test_an_engine_that_crashes_on_every_first_request_ends_failed(supervise):
    run = supervise("--fault", "crash")  # after_requests 0: the first liveness probe kills it
    assert run.finish(within_s=60) == FAILED
    cycle = ["start", "ready", "probe_failed", "exit"]
    assert run.kinds() == cycle + ["restart"] + cycle + ["give_up"]
    events = run.events()
    assert [e["code"] for e in events if e["kind"] == "exit"] == [13, 13]
    assert run.supervisor.state == FAILED
    assert "engine exited with code 13" in run.supervisor.failure and "giving up" in run.supervisor.failure
    assert run.supervisor.engine is None


def test_an_engine_busy_with_a_long_stream_is_not_probed_and_not_restarted(supervise, tmp_path: Path):
    # one sequence slot, held for ~10 s by a stream decoding 500 tokens at 20 ms a step. Its counters move,
    # so the supervisor sends no probe: the engine never holds a request of the supervisor's beside real
    # traffic (the probe used to queue behind it, and a capacity run on this engine counted it as a
    # waiting request); once the engine is idle again, probes resume and answer.
    config = tmp_path / "one-slot.json"
    config.write_text(json.dumps({"max_num_seqs": 1, "cost": {"step_overhead_s": 0.02}}))
    run = supervise("--config", str(config))
    run.wait_for(lambda k: "ready" in k, within_s=40)

    def gauge(name: str) -> float:
        with urllib.request.urlopen(run.url + "/metrics", timeout=10) as resp:
            lines = resp.read().decode().splitlines()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in lines
            if line.startswith(name + "{") or line.startswith(name + " ")
        )

    body = json.dumps({"model": "sim", "prompt": "hello", "max_tokens": 500, "ignore_eos": True}).encode()
    request = urllib.request.Request(
        run.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    long_one = threading.Thread(target=lambda: urllib.request.urlopen(request, timeout=60).read(), daemon=True)
    long_one.start()
    busy = []
    while long_one.is_alive():
        busy.append((gauge("vllm:num_requests_running"), gauge("vllm:num_requests_waiting")))
        time.sleep(0.2)  # sleep: the sampling rate of the gauges, not a wait
    running = [w for r, w in busy if r >= 1]  # while the stream held the one slot (before, it waited itself)
    assert len(running) >= 20, busy  # about 10 s of decoding, sampled 5 times a second
    assert max(running) == 0, busy  # nothing of the supervisor's queued behind it
    assert max(r for r, _ in busy) == 1
    after_long = gauge("vllm:request_success_total")
    wait_until(  # idle again: probes resume and answer
        lambda: gauge("vllm:request_success_total") >= after_long + 2,
        10 * POLICY.probe_interval_s + 5,
        "probes answering once the engine was idle",
        every_s=0.1,
    )
    run.supervisor.stop()
    assert run.finish() == STOPPED
    kinds = run.kinds()
    assert "probe_failed" not in kinds and "restart" not in kinds, kinds
