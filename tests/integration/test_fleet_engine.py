"""Replicas behind a real router on the real embedded engine: `loadproof serve embedded-fleet` starts two vLLM CPU
replicas (1 GiB of KV each) and vllm-router in front (the `fleet` fixture). Round robin reaches both replicas, the
router's own count per replica equal to each replica's count of requests served; a second router (`loadproof router`,
cache_aware) fronts the same replicas without restarting them and renders prompts on them (`--enable-scale-out`);
a policy the router does not have and a replica count the machine cannot hold are one line each, exit 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from loadproof.config.profile import packaged_profiles
from loadproof.engines.process import free_port
from tests.integration.conftest import Fleet, metric_total

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]
PREFIX = "You are the harbor master's assistant. Answer in one short sentence. " * 12


def chat(url: str, text: str, max_tokens: int = 8) -> str:
    """One streaming chat request through `url`; the answer's text."""
    body = {"model": "gemma-3-270m", "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    pieces = []
    with urllib.request.urlopen(request, timeout=300) as resp:
        for line in resp:
            if line.startswith(b"data: {"):
                delta = json.loads(line[6:])["choices"]
                pieces += [c["delta"].get("content") or "" for c in delta]
    return "".join(pieces)


def test_round_robin_through_the_router_reaches_both_replicas(fleet: Fleet):
    assert fleet.policy == "round_robin" and len(fleet.replicas) == 2
    for url in fleet.replicas:  # each replica serves on its own, too
        with urllib.request.urlopen(url + "/v1/models", timeout=10) as resp:
            assert b"gemma-3-270m" in resp.read()
    routed, served = fleet.routed(), fleet.served()
    answers = [chat(fleet.url, f"Name a harbor, number {i}.") for i in range(6)]
    assert all(answers)
    sent = [a - b for a, b in zip(fleet.routed(), routed)]
    assert sent == [3.0, 3.0]  # the router's own count: round robin, three each
    assert [a - b for a, b in zip(fleet.served(), served)] == sent  # each replica served what it was sent
    assert metric_total(fleet.router_metrics, "vllm_router_active_workers") == 2


def test_a_second_router_with_cache_aware_fronts_the_same_replicas(fleet: Fleet, tmp_path: Path):
    port, metrics_port = free_port(), free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    argv = [
        sys.executable,
        "-m",
        "loadproof",
        "router",
        "--worker-urls",
        ",".join(fleet.replicas),
        "--out",
        str(tmp_path),
    ]
    argv += ["--policy", "cache_aware", "--port", str(port), "--prometheus-port", str(metrics_port)]
    with open(tmp_path / "router.stderr", "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"router: vllm-router (cache_aware) at http://127.0.0.1:{port} in front of "), (
            line + (tmp_path / "router.stderr").read_text()[-2000:]
        )
        for i in range(4):  # one shared prefix: the router renders each prompt on a replica and matches it
            assert chat(f"http://127.0.0.1:{port}", PREFIX + f"Question {i}: which harbor?")
        decisions = "vllm_router_prefix_routing_decisions_total"
        assert metric_total(metrics, decisions, 'outcome="prefix_hit"') >= 1
        with pytest.raises(KeyError):  # the replicas render (--enable-scale-out): never "missing tokens"
            metric_total(metrics, decisions, 'outcome="missing_tokens"')
        assert sorted(fleet.routed(metrics)) == [0.0, 4.0]  # the shared prefix stays on one replica
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        code = proc.wait(timeout=60)
        proc.stdout.close()
    assert code == 130 and "interrupted; stopped the router" in (tmp_path / "router.stderr").read_text()


def profile_with(tmp_path: Path, old: str, new: str) -> Path:
    text = packaged_profiles()["embedded-fleet"]
    assert old in text
    path = tmp_path / "fleet.toml"
    path.write_text(text.replace(old, new).replace("\nport = 8090", f"\nport = {free_port()}"), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            'policy = "round_robin"',
            'policy = "least_busy"',
            "replicas: Value error, vllm-router has no policy 'least_busy' (its policies: random, round_robin, ",
        ),
        ("count = 2", "count = 9", "[replicas] count = 9: this host cannot hold them: about 9 x "),
    ],
)
def test_a_fleet_this_host_cannot_run_is_one_line_and_exit_2(tmp_path: Path, old: str, new: str, said: str):
    path = profile_with(tmp_path, old, new)
    out = subprocess.run(
        [sys.executable, "-m", "loadproof", "serve", str(path), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2 and said in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert "GiB available of" in out.stderr or "least_busy" in out.stderr
    assert not list(tmp_path.glob("serve-*"))  # refused before anything started
