"""An engine as a child process: start it, wait until it really serves, stop it with nothing left behind.

The engine runs in its own process group (vLLM forks an engine core and workers), so stopping sends
SIGTERM to the whole group, waits, then SIGKILLs whatever is left: no orphan holds the port or the
memory. Readiness is `/health` answering 200 and `/v1/models` listing the served name, within a bound
sized to model load and warm-up; a process that exits first is reported with the tail of its log.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from loadproof.engines.base import Engine, LaunchCommand, StartupReport
from loadproof.errors import EngineStartError

Status = Callable[[str], None]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_ERROR_LINE = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): (.+)$")


def root_cause(log_text: str) -> str | None:
    """The first `SomethingError: message` line of an engine log: the cause, not the cascade after it."""
    for line in log_text.splitlines():
        match = _ERROR_LINE.search(line)
        if match and "Engine core initialization failed" not in match.group(2):
            return f"{match.group(1)}: {match.group(2).strip()}"[:500]
    return None


def log_tail(path: Path, max_lines: int = 30) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(lines[-max_lines:])


class EngineProcess:
    def __init__(self, engine: Engine, command: LaunchCommand, host: str, port: int, log_path: Path) -> None:
        self.engine = engine
        self.command = command
        self.host = host
        self.port = port
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self.ready_after_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.command.env}
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def wait_ready(self, served_name: str, timeout_s: float, status: Status | None = None) -> None:
        assert self._proc is not None, "start() first"
        start = time.monotonic()
        deadline = start + timeout_s
        while True:
            code = self._proc.poll()
            if code is not None:
                text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
                cause = root_cause(text)
                raise EngineStartError(
                    f"engine exited with code {code} before it was ready: {cause or 'no error line in its log'} "
                    f"(log: {self.log_path})",
                    "" if cause else log_tail(self.log_path),
                )
            if self._serves(served_name):
                self.ready_after_s = time.monotonic() - start
                return
            if time.monotonic() > deadline:
                self.stop()
                raise EngineStartError(
                    f"engine not ready after {timeout_s:.0f} s (log: {self.log_path})", log_tail(self.log_path)
                )
            if status is not None:
                status(f"engine starting: {time.monotonic() - start:.0f} s, {_last_line(self.log_path)}")
            time.sleep(1.0)

    def _serves(self, served_name: str) -> bool:
        try:
            with urllib.request.urlopen(self.url + self.engine.health_path, timeout=2) as resp:
                if resp.status != 200:
                    return False
            with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as resp:
                return served_name.encode() in resp.read()
        except (urllib.error.URLError, OSError):
            return False

    def startup_report(self) -> StartupReport | None:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None
        return self.engine.parse_startup_report(text)

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the process group, wait `grace_s`, then SIGKILL it. Safe to call twice."""
        proc = self._proc
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group may outlive its leader
        except ProcessLookupError:
            pass
        proc.wait()
        # SIGKILL is delivered, not done: a worker freeing gigabytes can take a moment to go. Return only
        # once nothing of the group is left, so a caller's next start never meets the old engine.
        deadline = time.monotonic() + 10.0
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._proc = None


def _group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in this process group (Linux /proc; False elsewhere)."""
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return False
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _last_line(path: Path) -> str:
    tail = log_tail(path, 8).splitlines()
    for line in reversed(tail):
        line = line.strip()
        if line and "WARNING" not in line:
            text = line.split("] ", 1)[-1]
            return text[:80]
    return "waiting for the first log line"
