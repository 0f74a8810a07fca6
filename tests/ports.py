"""A port something listens on, for the tests of what loadproof refuses to start on it (a socket of the test's
own process: to the command under test, another process)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def listening(host: str = "127.0.0.1") -> Iterator[int]:
    """A port of `host` a socket listens on while the block runs."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        sock.listen()
        yield sock.getsockname()[1]
