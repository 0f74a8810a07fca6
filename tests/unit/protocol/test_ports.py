"""A port some process listens on is one line naming it (PortInUse, exit 2), before anything starts on it; a port
free but for connections in TIME_WAIT is free, as it is to the engine; and a base URL is built in one place."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from loadproof.errors import PortInUse, UsageError
from loadproof.protocol.ports import bind, check_free, listen
from loadproof.protocol.urls import base_url, url_of
from tests.ports import listening


@pytest.fixture
def taken() -> Iterator[int]:
    with listening() as port:
        yield port


def test_a_port_someone_listens_on_is_one_line_naming_it(taken):
    with pytest.raises(PortInUse) as raised:
        check_free("127.0.0.1", taken, "pass --port")
    assert str(raised.value) == (
        f"port {taken} on 127.0.0.1 is already in use (another engine?): stop it or pass --port"
    )
    assert raised.value.exit_code == 2


def test_a_free_port_is_free_and_stays_free(taken):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    check_free("127.0.0.1", port, "pass --port")
    check_free("127.0.0.1", port, "pass --port")  # the check itself leaves nothing bound


def test_a_port_whose_last_connection_waits_in_time_wait_is_free():
    """What vLLM and uvicorn (SO_REUSEADDR) can bind is not refused: a restart right after a stop is no mistake."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the engine that stopped had it
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its end of the connection waits in TIME_WAIT
        client.close()
    check_free("127.0.0.1", port, "pass --port")


def test_listening_after_another_process_began_listening_is_port_in_use(taken):
    """A bound socket does not keep another from binding the port; the one that listens second learns it then."""
    with socket.socket() as first:
        first.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        first.bind(("127.0.0.1", 0))
        port = first.getsockname()[1]
        second = bind("127.0.0.1", port, "pass --port")  # SO_REUSEADDR both: the bind succeeds
        first.listen()
        with pytest.raises(PortInUse, match=rf"^port {port} on 127.0.0.1 is already in use"):
            listen(second, "pass --port")


def test_an_address_this_host_does_not_have_is_a_usage_error():
    with pytest.raises(UsageError, match=r"^cannot listen on 192\.0\.2\.1:8000: .*not an address of this host"):
        check_free("192.0.2.1", 8000, "pass --port")


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [("127.0.0.1", 8000, "http://127.0.0.1:8000"), ("::1", 8000, "http://[::1]:8000"), ("[::1]", 1, "http://[::1]:1")],
)
def test_base_url(host, port, url):
    assert base_url(host, port) == url
    assert url_of(base_url(host, port), "/v1/models") == url + "/v1/models"
