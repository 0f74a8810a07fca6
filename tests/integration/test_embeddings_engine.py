"""Embeddings on the real embedded engine: Gemma 3 270M served as a pooling model (vLLM's `--runner pooling`,
from a profile with `runner = "pooling"`), supervised by `loadproof serve` with its relay in front. A load run
through the relay embeds two texts a request; the openai SDK's `embeddings.create` goes through the same relay;
a rerank load run (three documents a query) and curl rank documents through it too.
The prompt tokens the client counted agree with the engine's own counter, and the bundle verifies offline."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import openai
import pytest

from loadproof.config.profile import packaged_profiles
from loadproof.engines.process import free_port
from tests.integration.bundles import publish_and_verify
from tests.integration.conftest import start_serve, stop_serve
from tests.polling import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]
HIDDEN_SIZE = 640  # Gemma 3 270M's: the length of each vector


def pooling_profile(folder: Path) -> Path:
    text = packaged_profiles()["embedded"]
    assert '\nendpoint = "completions"' in text
    path = folder / "embedded-embeddings.toml"
    path.write_text(
        text.replace(
            '\nendpoint = "completions"', '\nendpoint = "embeddings"\nrunner = "pooling"\nenforce_eager = true', 1
        ).replace('VLLM_CPU_KVCACHE_SPACE = "4"', 'VLLM_CPU_KVCACHE_SPACE = "1"'),
        encoding="utf-8",
    )
    return path


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_an_embeddings_load_run_and_the_openai_sdk_through_the_relay(tmp_path: Path):
    profile = pooling_profile(tmp_path)
    port = free_port()
    relay = f"http://127.0.0.1:{port}"
    handle = start_serve([str(profile), "--relay", "--relay-port", str(port)], tmp_path / "serve.stderr")
    try:
        wait_until(lambda: healthy(relay), 60, "the relay's /health", every_s=0.2)
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadproof",
                "run",
                "load",
                "--url",
                relay,
                "--profile",
                str(profile),
                "--engine-metrics",
                relay + "/engine/metrics",
                "--rate",
                "4",
                "-n",
                "24",
                "--input-tokens",
                "64",
                "--inputs-per-request",
                "2",
                "--slo",
                "e2el=30s",
                "--out",
                str(tmp_path / "runs"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        client = openai.OpenAI(base_url=relay + "/v1", api_key="unused", max_retries=0)
        answer = client.embeddings.create(model="gemma-3-270m", input=["a river stone", "a quiet harbor"])
        client.close()
        # the same model ranks documents against a query (vLLM: by the cosine of their vectors), through the relay
        reranked = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadproof",
                "run",
                "load",
                "--url",
                relay,
                "--endpoint",
                "rerank",
                "--engine-metrics",
                relay + "/engine/metrics",
                "--rate",
                "4",
                "-n",
                "12",
                "--input-tokens",
                "48",
                "--inputs-per-request",
                "3",
                "--out",
                str(tmp_path / "rerank"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        curl = subprocess.run(
            [
                "curl",
                "-sS",
                "--fail",
                relay + "/v1/rerank",
                "-H",
                "content-type: application/json",
                "-d",
                json.dumps(
                    {
                        "model": "gemma-3-270m",
                        "query": "harbor",
                        "documents": ["a quiet harbor", "tax law", "boats at a pier"],
                    }
                ),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stop_serve(handle)
    runs = sorted((tmp_path / "runs").glob("load-*"))
    assert ran.returncode == 0 and runs, ran.stderr[-3000:]
    claims = {c["name"]: c["value"] for c in json.loads((runs[-1] / "claims.json").read_text())["claims"]}
    assert claims["load.requests"] == 24 and claims["load.failed_requests"] == 0
    assert claims["load.embeddings.vectors_per_request"] == 2.0 and claims["load.input_tokens_mismatched"] == 0
    assert claims["crosscheck.prompt_tokens.client"] == claims["crosscheck.prompt_tokens.engine"] > 24 * 2 * 60
    assert claims["load.input_tokens_per_s"] > 0 and claims["load.e2el_s.p50"] > 0
    assert not any(name.startswith(("load.ttft_s", "load.output_tokens")) for name in claims)
    assert [len(d.embedding) for d in answer.data] == [HIDDEN_SIZE, HIDDEN_SIZE]
    assert answer.usage.prompt_tokens > 4
    publish_and_verify(runs[-1], tmp_path / "bundle")
    ranked = sorted((tmp_path / "rerank").glob("load-*"))
    assert reranked.returncode == 0 and ranked, reranked.stderr[-3000:]
    claims = {c["name"]: c["value"] for c in json.loads((ranked[-1] / "claims.json").read_text())["claims"]}
    assert claims["load.requests"] == 12 and claims["load.failed_requests"] == 0
    assert claims["load.rerank.documents_per_request"] == 3.0 and claims["load.rerank.documents_per_s"] > 0
    assert claims["crosscheck.prompt_tokens.client"] == claims["crosscheck.prompt_tokens.engine"]
    assert curl.returncode == 0, curl.stderr
    assert sorted(r["index"] for r in json.loads(curl.stdout)["results"]) == [0, 1, 2]
