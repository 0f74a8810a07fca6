"""The supervisor around the real embedded engine: crashes and hangs lead to bounded restarts, then FAILED.

Faults are real: the engine is killed with SIGKILL, hung with SIGSTOP on its engine-core process (its
API server keeps answering /health, as in vLLM #36451), or fails at start on a bad setting. A crash and
a hang share one `serve` (two real starts, not four): the relay in front shows the restart as 503s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.conftest import _group_members, _processes_with, small_embedded
from tests.polling import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.timeout(600)]


def serve(tmp_path: Path, *args: str, profile: Path | None = None) -> subprocess.Popen[str]:
    target = [str(profile)] if profile else ["--embedded", "--eager"]
    return subprocess.Popen(
        [sys.executable, "-m", "loadproof", "serve", *target, "--out", str(tmp_path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_serving(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.search(r"at http://127\.0\.0\.1:(\d+)", line)
        if match:
            return int(match.group(1))
    raise AssertionError("serve ended before the engine was ready: " + (proc.stderr.read() if proc.stderr else ""))


def events(tmp_path: Path) -> list[dict]:
    (path,) = tmp_path.glob("serve-*/events.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def engine_group(port: int) -> int:
    (pid,) = [p for p in _processes_with(f"--port {port}") if "api_server" in Path(f"/proc/{p}/cmdline").read_text()]
    return os.getpgid(pid)


def group_pids(pgid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    out.append(int(entry.name))
            except ProcessLookupError:
                pass
    return out


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): its state in /proc is T."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_a_profile_needing_gpus_this_host_lacks_is_refused(tmp_path):
    profile = tmp_path / "gpu.toml"
    profile.write_text(
        'name = "gpu"\nengine = "vllm"\n[model]\npath = "m"\nserved_name = "m"\nmax_model_len = 4096\n'
        "[parallel]\ntensor = 2\n"
    )
    proc = serve(tmp_path, profile=profile)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert "needs 2 GPU(s), this host shows 0: refusing to start degraded" in err
    assert [e["kind"] for e in events(tmp_path)] == ["give_up"]


def test_an_engine_that_cannot_start_is_retried_a_bounded_number_of_times(tmp_path):
    profile = tmp_path / "broken.toml"
    profile.write_text(
        'name = "broken"\nengine = "embedded"\n[model]\npath = "embedded:gemma3-270m"\n'
        'served_name = "gemma-3-270m"\ndtype = "bfloat16"\nmax_model_len = 4096\n'
        '[serving]\nendpoint = "completions"\nenforce_eager = true\n'
        'extra_args = ["--max-num-seqs", "0"]\n'
    )
    proc = serve(tmp_path, "--max-restarts", "1", "--backoff-s", "0.5", profile=profile)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    kinds = [e["kind"] for e in events(tmp_path)]
    assert kinds == ["start", "start_failed", "restart", "start", "start_failed", "give_up"]
    assert "giving up" in err


def test_crash_then_hang_restart_once_then_fail_with_the_relay_answering_503_during_the_restart(tmp_path):
    """One engine lifetime for both faults and the relay (each real start costs ~45-65 s on 2 cores): the
    relay relays, a crash makes it answer 503 until the engine is restarted on the same port, it relays again,
    then a hang (the API server still answers /health) spends the restart budget and `serve` fails."""
    from loadproof.engines.process import free_port

    relay_port = free_port()
    proc = serve(
        tmp_path,
        "--relay",
        "--relay-port",
        str(relay_port),
        "--max-restarts",
        "1",
        "--backoff-s",
        "0.5",
        "--probe-interval-s",
        "1",
        "--probe-timeout-s",
        "3",
        profile=small_embedded(tmp_path),
    )
    relay = f"http://127.0.0.1:{relay_port}"
    body = json.dumps({"model": "gemma-3-270m", "prompt": "Hello", "max_tokens": 2}).encode()

    def through_relay() -> tuple[int, bytes]:
        request = urllib.request.Request(
            relay + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    try:
        port = wait_serving(proc)
        status, answer = through_relay()
        assert status == 200 and json.loads(answer)["choices"], answer
        os.killpg(engine_group(port), signal.SIGKILL)  # a crash

        def restarting() -> tuple[int, bytes] | None:
            reply = through_relay()
            return reply if reply[0] == 503 else None

        status, answer = wait_until(restarting, 30, "the relay reporting the restart", every_s=0.2)
        assert b"engine unavailable" in answer, answer
        assert wait_serving(proc) == port  # restarted on the same port
        status, answer = through_relay()
        assert status == 200 and json.loads(answer)["choices"], answer
        group = engine_group(port)
        core = [
            p
            for p in group_pids(group)
            if "EngineCore" in Path(f"/proc/{p}/cmdline").read_text()
            or "EngineCore" in Path(f"/proc/{p}/comm").read_text()
        ]
        assert core, "no engine-core process found"
        for pid in core:
            os.kill(pid, signal.SIGSTOP)  # a hang: the API server still runs
        wait_until(lambda: all(stopped(p) for p in core), 10, "the engine core stopped")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
            assert resp.status == 200  # /health says fine while nothing can be generated
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:  # a failed step: stop `serve` as a user would, so that its engine goes too
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 3, err
    kinds = [e["kind"] for e in events(tmp_path)]
    # a liveness probe in flight when the engine was killed may fail (the connection dropped) before the
    # supervisor sees the exit, a second later: it is logged, and the exit still brings the restart
    crash = kinds[: kinds.index("restart")]
    assert [k for k in crash if k != "probe_failed"] == ["start", "ready", "exit"], kinds
    assert crash.count("probe_failed") <= 1, kinds
    assert kinds[len(crash) : len(crash) + 3] == ["restart", "start", "ready"], kinds
    assert "probe_failed" in kinds[len(crash) :] and kinds[-1] == "give_up"
    assert "liveness probe failed" in events(tmp_path)[-1]["reason"]
    wait_until(  # zombies are not counted: they are gone, only not yet reaped
        lambda: not _group_members({group}),
        10,
        lambda: f"the hung engine was left behind: {_group_members({group})}",
        every_s=0.2,
    )
