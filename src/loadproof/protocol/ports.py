"""A local port to listen on: bound before a server says it listens, and checked free before an engine is launched
on it, so a port another process holds is one line naming it, before anything starts.

Both bind as uvicorn and vLLM do (SO_REUSEADDR: a port whose last connections wait in TIME_WAIT is free), so
what is refused here is what the engine itself would be refused: a port some process listens on.
"""

from __future__ import annotations

import errno
import socket

from loadproof.errors import EnvironmentFailure, PortInUse, UsageError

BACKLOG = 4096


def in_use(host: str, port: int, remedy: str, holder: str = "another engine?") -> str:
    """The one line that says `port` on `host` is taken, by what probably, and what to do."""
    return f"port {port} on {host} is already in use ({holder}): stop it or {remedy}"


def bind(host: str, port: int, remedy: str, holder: str = "another engine?") -> socket.socket:
    """A socket bound to `host:port`, not yet listening (the caller listens once it is ready to). A port in use
    is PortInUse (exit 2, `remedy` says what to do: "pass --port"); an address this host cannot listen on is a
    UsageError, any other refusal an EnvironmentFailure."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise refusal(exc, host, port, remedy, holder) from None
    return sock


def listen(sock: socket.socket, remedy: str, holder: str = "another engine?") -> None:
    """Listen on a socket from `bind`: a process that began listening on the port meanwhile is PortInUse too
    (a bound socket does not keep another from binding the port, only a listening one does)."""
    try:
        sock.listen(BACKLOG)
    except OSError as exc:
        host, port = sock.getsockname()[:2]
        sock.close()
        raise refusal(exc, host, port, remedy, holder) from None


def check_free(host: str, port: int, remedy: str, holder: str = "another engine?") -> None:
    """Raise PortInUse (one line naming the port) when some process listens on `host:port`: before an engine
    that would fail to bind it is launched, and before its readiness probe meets the other process instead."""
    sock = bind(host, port, remedy, holder)
    try:
        listen(sock, remedy, holder)
    finally:
        sock.close()


def refusal(exc: OSError, host: str, port: int, remedy: str, holder: str = "another engine?") -> Exception:
    """What a failed bind or listen on `host:port` means to the user, as one line."""
    if exc.errno == errno.EADDRINUSE:
        return PortInUse(in_use(host, port, remedy, holder))
    why = exc.strerror or type(exc).__name__
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return UsageError(f"cannot listen on {host}:{port}: {why} (not an address of this host)")
    return EnvironmentFailure(f"cannot listen on {host}:{port}: {why}")
