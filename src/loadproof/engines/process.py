"""An engine as a child process: start it, wait until it really serves, stop it with nothing left behind.

The engine runs in its own process group (vLLM forks an engine core and workers), so stopping sends
SIGTERM to the whole group, waits, then SIGKILLs whatever is left: no orphan holds the port or the
memory. Readiness is `/health` answering 200 and `/v1/models` listing the served name, within a bound
sized to model load and warm-up, asked with the engine's API key where the profile gives one, and answered by
the engine itself: its process alive, and the socket listening on the port one of its process group holds (an
engine already on that port answers the same requests, and must not pass for this one). A process that exits
first is reported with the cause its log gives (a port already in use named as such), else its log's tail. Every way out of the wait that is not "ready"
(an early exit, the timeout, a cancellation, an exception, Ctrl-C) stops the whole group first: an
engine core or worker left behind would keep the port and the GPU memory while a restart begins.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from loadproof.engines.base import LaunchCommand, ProcessKind, StartupReport
from loadproof.errors import EngineStartCancelled, EngineStartError
from loadproof.protocol.ports import in_use
from loadproof.protocol.urls import base_url, url_of

Status = Callable[[str], None]
STOP_GRACE_S = 20.0  # SIGTERM to SIGKILL
KILL_WAIT_S = 10.0  # after SIGKILL, until nothing of the group is left
READY_POLL_S = 0.5


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_ERROR_LINE = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): (.+)$")
# a log record below ERROR (vLLM's "WARNING 12-01 03:51:15 [file.py:255] ...", Python's "WARNING:name:"):
# its text may quote an error ("... can cause fd limit errors like `OSError: [Errno 24] Too many open
# files`") that is not what stopped the engine
_NOT_AN_ERROR = re.compile(r"\b(?:DEBUG|INFO|WARNING|WARN)(?:\s+\d\d-\d\d\s|:)")
# the engine could not listen: Python's socket error (vLLM, SGLang, uvicorn), or loadproof sim's own line
_PORT_TAKEN = re.compile(r"\[Errno 98\]|address already in use|port \d+ on \S+ is already in use", re.IGNORECASE)


def root_cause(log_text: str) -> str | None:
    """The first `SomethingError: message` line of an engine log: the cause, not the cascade after it."""
    for line in log_text.splitlines():
        if _NOT_AN_ERROR.search(line[:80]):
            continue
        match = _ERROR_LINE.search(line)
        if match and "Engine core initialization failed" not in match.group(2):
            return f"{match.group(1)}: {match.group(2).strip()}"[:500]
    return None


def exit_cause(log_text: str, host: str, port: int) -> str | None:
    """Why an engine exited, from its log: its port taken (by another engine: named, with what to do), else the
    log's `root_cause`."""
    if _PORT_TAKEN.search(log_text):
        return in_use(host, port, "pass --port", "another process took it")
    return root_cause(log_text)


def log_tail(path: Path, max_lines: int = 30) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(lines[-max_lines:])


class EngineProcess:
    def __init__(self, engine: ProcessKind, command: LaunchCommand, host: str, port: int, log_path: Path) -> None:
        self.engine = engine
        self.command = command
        self.host = host
        self.port = port
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._pgid: int | None = None
        self.ready_after_s: float | None = None
        self._log_at_ready = 0  # the log's size when the engine became ready: what it wrote after is its run
        # the key the engine will demand on /v1 (its flag, else its environment, as the child inherits it);
        # sent by loadproof's own readiness and liveness requests, never logged
        self.api_key: str | None = engine.api_key(command.argv, {**os.environ, **command.env})

    @property
    def url(self) -> str:
        return base_url(self.host, self.port)

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
        self._pgid = self._proc.pid  # the leader of a new session leads its process group

    def wait_ready(
        self, served_name: str, timeout_s: float, status: Status | None = None, cancel: threading.Event | None = None
    ) -> None:
        """Return once the engine serves `served_name`; else stop the whole group and raise.

        `cancel` (a supervisor's stop) ends the wait within about a second with EngineStartCancelled.
        """
        assert self._proc is not None, "start() first"
        try:
            self._wait_ready(served_name, timeout_s, status, cancel)
        except BaseException:  # exited, timed out, cancelled, Ctrl-C: nothing of the group may stay
            self.stop()
            raise

    def _wait_ready(
        self, served_name: str, timeout_s: float, status: Status | None, cancel: threading.Event | None
    ) -> None:
        assert self._proc is not None
        start = time.monotonic()
        deadline = start + timeout_s
        while True:
            if cancel is not None and cancel.is_set():
                raise EngineStartCancelled(f"stopped while the engine was starting (log: {self.log_path})")
            code = self._proc.poll()
            if code is not None:
                cause = self.exit_cause()
                raise EngineStartError(
                    f"engine exited with code {code} before it was ready: {cause or 'no error line in its log'} "
                    f"(log: {self.log_path})",
                    "" if cause else log_tail(self.log_path),
                )
            if self._serves(served_name) and self._answers_itself():
                self.ready_after_s = time.monotonic() - start
                self._log_at_ready = self._log_size()
                return
            if time.monotonic() > deadline:
                raise EngineStartError(
                    f"engine not ready after {timeout_s:.0f} s (log: {self.log_path})", log_tail(self.log_path)
                )
            if status is not None:
                status(f"engine starting: {time.monotonic() - start:.0f} s, {_last_line(self.log_path)}")
            if cancel is not None:
                cancel.wait(READY_POLL_S)
            else:
                time.sleep(READY_POLL_S)

    def _serves(self, served_name: str) -> bool:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            with urllib.request.urlopen(url_of(self.url, self.engine.health_path), timeout=2) as resp:
                if resp.status != 200:
                    return False
            request = urllib.request.Request(url_of(self.url, "/v1/models"), headers=headers)
            with urllib.request.urlopen(request, timeout=2) as resp:
                return served_name.encode() in resp.read()
        except (urllib.error.URLError, OSError, http.client.HTTPException):  # not up yet, or half up
            return False

    def _answers_itself(self) -> bool:
        """Whether what answered on the port is this engine: its process is alive and, where /proc tells, a
        process of its group holds the socket listening there (not another engine that held the port first)."""
        if self._proc is None or self._proc.poll() is not None or self._pgid is None:
            return False
        return listener_in_group(self._pgid, self.port) is not False

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def exit_cause(self) -> str | None:
        """Why the engine exited, from what its log says since it became ready (before: all of it); None when
        the log names no cause."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_at_ready)
                text = log.read().decode("utf-8", errors="replace")
        except OSError:
            return None
        return exit_cause(text, self.host, self.port)

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

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the process group, give the whole group `grace_s` to go, then SIGKILL what is left, and
        return only once nothing of the group is left. Safe to call twice, and after the leader exited
        (its children are still in the group and still stopped)."""
        proc, pgid = self._proc, self._pgid
        if proc is None or pgid is None:
            return
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        while _group_alive(pgid) and time.monotonic() < deadline:  # the leader went, its children may not have
            time.sleep(0.05)
        _signal_group(pgid, signal.SIGKILL)
        proc.wait()
        # SIGKILL is delivered, not done: a worker freeing gigabytes can take a moment to go. Return only
        # once nothing of the group is left, so a caller's next start never meets the old engine.
        deadline = time.monotonic() + KILL_WAIT_S
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._proc = self._pgid = None

    def kill(self) -> None:
        """SIGKILL the whole group at once, without waiting: the last resort of a caller out of time."""
        if self._pgid is not None:
            _signal_group(self._pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in this process group (Linux /proc; False elsewhere)."""
    return any(True for _ in _group_members(pgid))


def _group_members(pgid: int) -> Iterator[Path]:
    """The /proc folders of the live (non-zombie) processes of a process group (none where there is no /proc)."""
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            yield entry


_TCP_LISTEN = "0A"  # the state column of /proc/net/tcp


def listener_in_group(pgid: int, port: int) -> bool | None:
    """Whether a process of group `pgid` holds the socket listening on `port`: True, False (another process
    does), or None when this host cannot tell (no /proc/net/tcp, or no listening socket on the port in it)."""
    sockets: set[str] = set()
    tables = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        tables += 1
        for row in rows:  # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            fields = row.split()
            if len(fields) > 9 and fields[3] == _TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                sockets.add(f"socket:[{fields[9]}]")
    if not tables or not sockets:
        return None
    for member in _group_members(pgid):
        try:
            fds = list((member / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) in sockets:
                    return True
            except OSError:
                continue
    return False


def _last_line(path: Path) -> str:
    tail = log_tail(path, 8).splitlines()
    for line in reversed(tail):
        line = line.strip()
        if line and "WARNING" not in line:
            text = line.split("] ", 1)[-1]
            return text[:80]
    return "waiting for the first log line"
