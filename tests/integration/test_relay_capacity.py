"""The demo's capacity acceptance through a gateway, as production traffic goes: the real embedded engine
behind a real `loadproof relay` process with API keys, every request of the run sent to the relay, the
engine's own metrics scraped through the relay's `/engine/metrics`, its token counts from the engine's
`/tokenize` through the relay, or counted here from the model's chat template (`--token-counts local`).

The demo's settings: 4 sessions of 1,536 tokens generating together for a 6 s window. Every criterion
must PASS, the chat endpoint included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_relay import KEY, RelayProcess

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]

CRITERIA = {
    "engine_idle_before",
    "all_streams_started",
    "prompt_tokens",
    "running",
    "waiting",
    "preemptions",
    "streams_progress",
    "cold_prefix_cache",
    "probes",
    "drain",
}
KEY_ENV = "LOADPROOF_TEST_RELAY_KEY"


@pytest.fixture(scope="module")
def relay(engine, tmp_path_factory) -> Iterator[RelayProcess]:
    proc = RelayProcess(engine.url, tmp_path_factory.mktemp("relay") / "relay.log")
    yield proc
    if proc.proc.poll() is None:
        proc.stop()


def capacity_through(
    relay: RelayProcess, engine, out: Path, *args: str, engine_metrics: bool = True, refused: bool = False
) -> tuple[subprocess.CompletedProcess[str], Path]:
    metrics = ["--engine-metrics", relay.url + "/engine/metrics"] if engine_metrics else []
    argv = [
        sys.executable,
        "-m",
        "loadproof",
        "run",
        "capacity",
        "--url",
        relay.url,
        *metrics,
        "--api-key-env",
        KEY_ENV,
        "--tokenizer",
        str(engine.tokenizer.parent),
        "--sessions",
        "4",
        "--input-tokens",
        "1536",
        "--window-s",
        "6",
        "--out",
        str(out),
        *args,
    ]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**os.environ, KEY_ENV: KEY})
    runs = sorted(out.glob("capacity-*"))
    # a run refused before its first request leaves no run directory behind (it would hold nothing measured)
    assert len(runs) == (0 if refused else 1), result.stdout + result.stderr
    return result, runs[0] if runs else out / "capacity-refused"


def check_pass(result: subprocess.CompletedProcess[str], run: Path) -> dict:
    claims = {c["name"]: c for c in json.loads((run / "claims.json").read_text())["claims"]}
    criteria = {k.split(".criteria.")[1]: v for k, v in claims.items() if ".criteria." in k}
    evidence = "\n".join(f"{k}: {v['value']} {v['formula']}" for k, v in criteria.items())
    print(f"\n{run.name} ({result.args[result.args.index('--endpoint') + 1]}):\n{evidence}", file=sys.stderr)
    assert result.returncode == 0, evidence + "\n" + result.stderr[-3000:]
    assert set(criteria) == CRITERIA and {v["value"] for v in criteria.values()} == {"PASS"}, evidence
    assert "engine idle: 0 running, 0 waiting" in result.stderr
    assert claims["capacity.probes_retrieved"]["value"] == 4
    rows = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    assert [r["prompt_tokens"] for r in rows] == [1536] * 4
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["target"]["url"] == result.args[result.args.index("--url") + 1]
    assert manifest["target"]["metrics"]["url"].endswith("/engine/metrics")
    samples = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(s["values"]["num_requests_running"] for s in samples) == 4  # the engine's gauge, via the relay
    for path in run.iterdir():
        assert KEY not in path.read_text(errors="replace"), path.name
    return manifest


def relay_metrics(relay: RelayProcess) -> str:
    request = urllib.request.Request(relay.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return resp.read().decode()


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_the_demos_capacity_passes_through_the_relay_with_the_engines_metrics_beside_it(
    engine, relay, tmp_path, endpoint
):
    result, run = capacity_through(relay, engine, tmp_path, "--endpoint", endpoint)
    manifest = check_pass(result, run)
    assert manifest["target"]["token_counts"] == "engine"
    assert manifest["plan"]["overhead_source"] == "engine /tokenize"  # the engine's, through the relay
    own = relay_metrics(relay)
    assert "vllm:" not in own and "loadproof_relay_in_flight 0.0" in own  # the relay's figures only


def test_the_relays_own_metrics_are_never_taken_for_the_engines(engine, relay, tmp_path):
    # the first attempt: through the relay, without --engine-metrics, every engine criterion failed
    # with "no /metrics sample inside the window"; now the run stops before sending a session, in one line
    result, run = capacity_through(
        relay, engine, tmp_path, "--endpoint", "completions", engine_metrics=False, refused=True
    )
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
    assert f"the metrics at {relay.url}/metrics show none of the engine's" in errors[0]
    assert "RELAY/engine/metrics (--engine-metrics)" in errors[0]
    assert not run.exists()  # refused before a session was sent: nothing measured, nothing left in --out


def test_local_token_counts_pass_through_the_relay(engine, relay, tmp_path):
    result, run = capacity_through(relay, engine, tmp_path, "--endpoint", "chat", "--token-counts", "local")
    manifest = check_pass(result, run)
    assert manifest["target"]["token_counts"] == "local"
    source = manifest["plan"]["overhead_source"]
    assert source.startswith(
        "local: the chat template (chat_template.jinja) rendered locally; checked on the engine (usage.prompt_tokens "
    ), source
    rows = [json.loads(line) for line in relay.stop().splitlines() if line.startswith("{")]
    paths = {r["path"] for r in rows}
    assert {"/tokenize", "/engine/metrics", "/v1/chat/completions", "/v1/completions"} <= paths
    assert all(r["outcome"] in ("ok", "client_disconnect") for r in rows), {r["outcome"] for r in rows}
