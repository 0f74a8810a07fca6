"""`loadproof serve` of a fleet below the CLI: the dry run renders every replica and the router, the checks made
before anything starts (ports, the host's memory) are one line each, and the router's liveness probe."""

import http.server
import subprocess
import sys
import threading

import pytest

from loadproof.config.profile import packaged_profile, parse_profile
from loadproof.engines.base import flag_value
from loadproof.engines.process import free_port
from loadproof.errors import PortInUse, UsageError
from loadproof.protocol.ports import bind
from loadproof.supervisor.fleet import (
    check_fleet_host,
    check_fleet_ports,
    distinct_free_ports,
    dry_run_fleet,
    router_answers,
)
from loadproof.supervisor.probe import ProbeOutcome
from loadproof.supervisor.serving import ServeOptions, dry_run

GIB = 1024**3


def test_the_dry_run_renders_each_replica_on_its_port_and_the_router_in_front_of_them():
    steps, notes = dry_run(packaged_profile("embedded-fleet"))
    assert [s.node for s in steps] == ["replica 1", "replica 2", "the router (vllm-router, round_robin)"]
    assert [flag_value(s.argv, "--port") for s in steps] == ["8001", "8002", "8090"]  # the router: the profile's
    for step in steps[:2]:
        assert "--enable-scale-out" in step.argv and step.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    router = steps[2].argv
    at = router.index("--worker-urls")
    assert router[at + 1 : at + 3] == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    assert flag_value(router, "--policy") == "round_robin" and flag_value(router, "--prometheus-port") == "29000"
    assert router[0].endswith("vllm-router") and notes == []  # the suite's environment has it (the test extra)


def test_the_dry_run_of_a_router_not_installed_renders_its_name_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # scripts/in-venv puts the venv's bin, where it is installed, on PATH
    monkeypatch.setattr("loadproof.engines.router.sys.executable", "/nowhere/bin/python")
    steps, notes = dry_run_fleet(packaged_profile("embedded-fleet"))
    assert steps[-1].argv[0] == "vllm-router" and notes == [
        "vllm-router is not installed (no vllm-router beside /nowhere/bin/python or on PATH): "
        "pip install 'loadproof[router]'"
    ]


def test_serve_dry_run_prints_every_command_and_takes_another_policy():
    out = subprocess.run(
        [sys.executable, "-m", "loadproof", "serve", "embedded-fleet", "--dry-run", "--router-policy", "cache_aware"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("vllm.entrypoints.openai.api_server") == 2 and out.stdout.count("--enable-scale-out") == 2
    assert "# on the router (vllm-router, cache_aware):" in out.stdout and "--policy cache_aware" in out.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["serve", "embedded-fleet", "--router-policy", "lru"],
            "error: --router-policy: vllm-router has no policy 'lru'",
        ),
        (
            ["router", "--worker-urls", "http://127.0.0.1:1,http://127.0.0.1:2", "--policy", "lru", "--port", "1"],
            "error: vllm-router has no policy 'lru' (its policies: random, round_robin, cache_aware,",
        ),
        (
            ["router", "--worker-urls", "127.0.0.1:1", "--policy", "round_robin", "--port", "1"],
            "error: --worker-urls takes",
        ),
    ],
)
def test_a_policy_the_router_lacks_or_a_bad_url_is_one_line_and_exit_2(args, said):
    out = subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith(said), out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_a_port_named_twice_or_taken_is_one_line_before_anything_starts():
    profile = packaged_profile("embedded-fleet")  # the router on 8090
    with pytest.raises(UsageError, match="port 8090 is given to both the router .* and the relay"):
        check_fleet_ports(profile, ServeOptions(relay_port=8090))
    taken = bind("127.0.0.1", 0, "-")
    taken.listen()
    try:
        port = taken.getsockname()[1]
        data = packaged_profile("embedded-fleet").model_dump()
        data["replicas"]["ports"] = [free_port(), port]
        with pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 is already in use .*change \\[replicas\\]"):
            check_fleet_ports(parse_profile(data, "test"), ServeOptions())
    finally:
        taken.close()


def test_free_ports_are_distinct_from_each_other_and_from_those_given():
    given = [None, 9001, None, None]
    ports = distinct_free_ports("127.0.0.1", given, {8080})
    assert ports[1] == 9001 and len(set(ports)) == 4 and 8080 not in ports


def test_the_host_check_counts_the_replicas_against_what_is_available():
    profile = packaged_profile("embedded-fleet")
    check_fleet_host(profile, available=20 * GIB, total=24 * GIB)
    with pytest.raises(UsageError, match=r"^\[replicas\] count = 2: this host cannot hold them: about 2 x "):
        check_fleet_host(profile, available=6 * GIB, total=24 * GIB)


class Answers(http.server.BaseHTTPRequestHandler):
    status = 503

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class Process:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"


def test_the_router_is_alive_while_its_health_answers_at_all():
    server = http.server.HTTPServer(("127.0.0.1", 0), Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = router_answers(Process(server.server_address[1]), "m", 5, threading.Event())
        assert result.ok and result.detail == "HTTP 503"  # a replica down is not the router's death
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert router_answers(Process(free_port()), "m", 5, threading.Event()).outcome is ProbeOutcome.REFUSED
