"""A port another process holds, and Ctrl-C on the commands that keep no run directory (issue #37).

A second `loadproof serve --embedded --port P` while an engine listened on P printed `[ready] after_s=0.0` and
"serving ... at :P" (the other engine had answered the readiness probe), restarted its own failing engine three
times and ended "engine exited with code 1" without naming the port; `loadproof sim` on a busy port said
"listening" and exited 3 in silence. Now every port serve, the relay and the simulator are to listen on is
checked before anything is installed, launched or printed: one line naming the port, exit 2 (PortInUse). The
readiness probe counts only an answer from the engine's own process group, and a start that fails on a taken
port says so. Ctrl-C on serve, relay and sim says what it stopped, not "what finished is in the run directory".

Real processes throughout: the CLI as a user runs it, a plain listening socket or `loadproof sim` on the port.
None needs the real engine: serve --embedded refuses before it installs anything (LOADPROOF_HOME is empty, and
pip is kept off the network, so a regression fails fast instead of installing vLLM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadproof.config.profile import load_profile
from loadproof.engines import engines
from loadproof.engines.base import LaunchCommand
from loadproof.engines.process import EngineProcess, free_port
from loadproof.errors import EngineStartError
from tests.integration.sim_process import SimProcess
from tests.integration.test_serve_interrupt import Serve, sim_profile
from tests.polling import wait_until
from tests.ports import listening

pytestmark = pytest.mark.timeout(120)

EXIT_WITHIN_S = 60.0  # a cold start of the CLI on a loaded 2-core machine, with room


@pytest.fixture
def occupied() -> Iterator[int]:
    with listening() as port:
        yield port


def loadproof(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`loadproof ARGS` to its end: exit code, stdout, stderr. Its group is killed if it outlives the bound."""
    env = {**os.environ, "LOADPROOF_HOME": str(tmp_path / "home"), "PIP_NO_INDEX": "1", "COLUMNS": "300"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadproof", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"`loadproof {' '.join(args)}` still ran after {EXIT_WITHIN_S:g} s:\n{out[-2000:]}{err[-2000:]}")
    finally:
        try:  # whatever it started in a group of its own (an engine) is reaped by the test that started it
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out, err


def busy(port: int, holder: str, remedy: str) -> str:
    return f"error: port {port} on 127.0.0.1 is already in use ({holder}): stop it or {remedy}"


def assert_refused_at_once(code: int, out: str, err: str, line: str) -> None:
    assert code == 2, f"exit {code}:\n{out}{err}"
    assert err.strip().splitlines() == [line], err
    for said in ("ready", "serving", "listening", "start"):
        assert said not in out + err.replace(line, ""), out + err


# -- serve: every port checked before anything is installed or launched ---------------------------------


def test_serve_embedded_on_a_busy_port_refuses_before_it_installs_or_launches(tmp_path, occupied):
    code, out, err = loadproof(tmp_path, "serve", "--embedded", "--port", str(occupied), "--out", str(tmp_path / "r"))
    assert_refused_at_once(code, out, err, busy(occupied, "another engine?", "pass --port"))
    assert not (tmp_path / "home").exists(), "the engine was installed (or its log begun) before the port check"
    assert not (tmp_path / "r").exists(), "a supervisor began"


def test_serve_on_the_port_of_another_engine_is_not_fooled_by_its_answers(tmp_path):
    """The issue's reproduction with the simulator for both engines: the one already there serves the same name."""
    with SimProcess(tmp_path / "other.log", "--served-model-name", "tiny") as other:
        code, out, err = loadproof(tmp_path, "serve", str(sim_profile(tmp_path)), "--port", str(other.port))
        assert_refused_at_once(code, out, err, busy(other.port, "another engine?", "pass --port"))
        assert other.healthy()


def test_serve_with_the_relay_on_a_busy_port_refuses_before_it_launches(tmp_path, occupied):
    code, out, err = loadproof(tmp_path, "serve", str(sim_profile(tmp_path)), "--relay", "--relay-port", str(occupied))
    assert_refused_at_once(code, out, err, busy(occupied, "another engine?", "pass --relay-port"))


def test_serve_with_one_port_for_the_engine_and_the_relay_is_a_usage_error(tmp_path):
    port = str(free_port())
    code, out, err = loadproof(
        tmp_path, "serve", str(sim_profile(tmp_path)), "--port", port, "--relay", "--relay-port", port
    )
    assert code == 2, out + err
    assert err.strip() == f"error: port {port} is given to both the engine and the relay: give each its own"


@pytest.mark.parametrize("taken", ["decode", "relay"])
def test_serve_a_pair_with_a_busy_port_refuses_before_it_installs_or_launches(tmp_path, occupied, taken):
    profile = tmp_path / "pd.toml"
    decode_port = occupied if taken == "decode" else free_port()
    profile.write_text(
        'name = "pd"\nengine = "embedded"\n[model]\npath = "embedded:gemma3-270m"\nserved_name = "tiny"\n'
        'max_model_len = 8192\n[serving]\nendpoint = "completions"\n'
        f'[disaggregation]\nconnector = "ExampleConnector"\nstorage_path = "{tmp_path / "kv"}"\n'
        f"[disaggregation.decode]\nport = {decode_port}\n"
    )
    relay_port = occupied if taken == "relay" else free_port()
    code, out, err = loadproof(tmp_path, "serve", str(profile), "--port", str(relay_port), "--out", str(tmp_path / "r"))
    remedy = "change [disaggregation.decode] port in the profile" if taken == "decode" else "pass --port"
    assert_refused_at_once(code, out, err, busy(occupied, "another engine?", remedy))
    assert not (tmp_path / "home").exists() and not (tmp_path / "kv").exists() and not (tmp_path / "r").exists()


# -- the relay and the simulator: the port bound before "listening" is said --------------------------------


def test_relay_on_a_busy_port_is_one_line_naming_it(tmp_path, occupied):
    code, out, err = loadproof(tmp_path, "relay", "--upstream", "http://127.0.0.1:9", "--port", str(occupied))
    assert_refused_at_once(code, out, err, busy(occupied, "another relay or engine?", "pass --port"))


def test_sim_on_a_busy_port_is_one_line_naming_it_and_never_says_listening(tmp_path, occupied):
    code, out, err = loadproof(tmp_path, "sim", "--port", str(occupied))
    assert_refused_at_once(code, out, err, busy(occupied, "another simulator or engine?", "pass --port"))
    assert out == ""


# -- the readiness probe answers for the engine's own process group only ---------------------------------


def test_an_engine_already_on_the_port_does_not_pass_for_the_one_starting(tmp_path):
    """The engine launched (here one that never listens) is alive; the one answering is another process."""
    with SimProcess(tmp_path / "other.log", "--served-model-name", "tiny") as other:
        engine = EngineProcess(
            engines.get("sim"), LaunchCommand(["sleep", "300"], {}), "127.0.0.1", other.port, tmp_path / "e.log"
        )
        engine.start()
        try:
            with pytest.raises(EngineStartError, match=r"^engine not ready after 2 s"):
                engine.wait_ready("tiny", timeout_s=2.0)
        finally:
            engine.stop()


@pytest.mark.parametrize("engine_kind", ["vllm-like", "sim"])
def test_a_start_that_fails_on_a_taken_port_names_the_port(tmp_path, occupied, engine_kind):
    sim = engines.get("sim")
    if engine_kind == "sim":  # `loadproof sim` under the supervisor, as `serve` launches a sim profile
        command = sim.launch_command(load_profile(sim_profile(tmp_path)), sys.executable, "sim", occupied)
    else:  # what vLLM's API server prints when its port is taken
        command = LaunchCommand(["sh", "-c", "echo 'OSError: [Errno 98] Address already in use' >&2; exit 1"], {})
    engine = EngineProcess(sim, command, "127.0.0.1", occupied, tmp_path / "e.log")
    engine.start()
    with pytest.raises(EngineStartError) as raised:
        engine.wait_ready("tiny", timeout_s=EXIT_WITHIN_S)
    assert f"before it was ready: port {occupied} on 127.0.0.1 is already in use" in str(raised.value)


# -- Ctrl-C on the commands that keep no run directory ----------------------------------------------------


def test_ctrl_c_on_the_relay_says_the_relay_stopped(tmp_path):
    port = free_port()
    out_path, err_path = tmp_path / "relay.out", tmp_path / "relay.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadproof", "relay", "--upstream", "http://127.0.0.1:9", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    try:
        wait_until(lambda: "relay listening" in out_path.read_text() or proc.poll() is not None, 30, "the relay")
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=EXIT_WITHIN_S) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = err_path.read_text()
    assert said.strip().splitlines()[-1] == "interrupted; the relay stopped", said
    assert "run directory" not in said


def test_ctrl_c_on_the_simulator_says_it_stopped(tmp_path):
    with SimProcess(tmp_path / "sim.log") as sim:
        os.killpg(sim.proc.pid, signal.SIGINT)
        assert sim.wait_exit(EXIT_WITHIN_S) == 130
    said = (tmp_path / "sim.log").read_text()
    assert said.strip().splitlines()[-1] == "interrupted; the simulator stopped", said
    assert "run directory" not in said


@pytest.mark.parametrize("relay", [False, True], ids=["serve", "serve-relay"])
def test_ctrl_c_on_serve_says_what_it_stopped(tmp_path, relay):
    run = Serve(tmp_path, sim_profile(tmp_path), relay=relay)
    try:
        run.wait_serving()
        run.ctrl_c()
        assert run.wait_exit(EXIT_WITHIN_S) == 130
    finally:
        run.kill()
    said = run.stderr_path.read_text()
    folder = next(run.out.glob("serve-*"))
    stopped = "the relay and the engine" if relay else "the engine"
    assert said.strip().splitlines()[-1] == f"interrupted; stopped {stopped} (supervisor events: {folder})", said
    assert "run directory" not in said
