"""LoRA adapters on the real embedded engine: two adapters made at test time (seeded random weights of the
right shapes, `engines.embedded.make_lora`, through the engine's own torch and safetensors), served beside the
base model from a profile's `[lora]`, and a load run whose requests go 0.5/0.3/0.2 to the base and the two
adapters: each model's figures claimed apart, each record naming its model, and the bundle verifying offline.
The engine keeps one adapter loaded (`max_loras = max_cpu_loras = 1`), so every switch between the two is a
cold load: the churn figures count them from the records. A mix naming an adapter the engine does not list is
one line before any run directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.engines.embedded import make_lora
from tests.integration.bundles import publish_and_verify
from tests.integration.conftest import small_embedded, start_serve, stop_serve

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]
MIX = "gemma-3-270m=0.5,adapter-a=0.3,adapter-b=0.2"


def load(url: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loadproof", "run", "load", "--url", url, "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_mix_of_the_base_model_and_two_adapters(tmp_path: Path):
    adapters = {
        name: make_lora(tmp_path / name, rank=8, seed=seed) for seed, name in enumerate(("adapter-a", "adapter-b"))
    }
    profile = small_embedded(
        tmp_path,
        "\n[lora]\nadapters = { "
        + ", ".join(f'{name} = "{path}"' for name, path in adapters.items())
        + " }\nmax_loras = 1\nmax_cpu_loras = 1\nmax_lora_rank = 8\n",
    )
    handle = start_serve([str(profile)], tmp_path / "serve.stderr")
    try:
        url = handle.engine.url
        ran = load(
            url,
            tmp_path / "mix",
            "--profile",
            str(profile),
            "--rate",
            "4",
            "-n",
            "30",
            "--input-tokens",
            "64",
            "--output-tokens",
            "8",
            "--model-mix",
            MIX,
            "--slo",
            "ttft=10s",
        )
        bad = load(url, tmp_path / "bad", "--rate", "4", "-n", "3", "--model-mix", "gemma-3-270m=1,adapter-c=1")
    finally:
        stop_serve(handle)
    runs = sorted((tmp_path / "mix").glob("load-*"))
    assert ran.returncode == 0 and runs, ran.stderr[-3000:]
    claims = {c["name"]: c["value"] for c in json.loads((runs[-1] / "claims.json").read_text())["claims"]}
    print(json.dumps({k: v for k, v in claims.items() if ".model." in k or ".lora." in k}, indent=1))  # with -s
    counts = {m: claims[f"load.model.{m}.requests"] for m in ("gemma-3-270m", "adapter-a", "adapter-b")}
    assert sum(counts.values()) == 30 and all(n > 0 for n in counts.values()), counts
    assert all(claims[f"load.model.{m}.failed_requests"] == 0 for m in counts)
    assert all(claims[f"load.model.{m}.ttft_s.p50"] > 0 for m in counts)
    records = [json.loads(line) for line in (runs[-1] / "requests.jsonl").read_text().splitlines()]
    assert {r["model"] for r in records} == set(counts)
    # churn: one slot, so an adapter request is cold when the adapter request before it asked for the other one
    asked = [r["model"] for r in sorted(records, key=lambda r: r["send_ns"]) if r["model"].startswith("adapter")]
    switches = sum(a != b for a, b in zip([None, *asked], asked))
    assert claims["load.lora.slots"] == 1 and claims["load.lora.cold_requests"] == switches >= 2
    assert claims["load.lora.cold_ttft_s.p50"] > 0
    # the engine's own word: its lora_requests_info listed one adapter running at most (one slot)
    assert claims["load.lora.engine_running_adapters_max"] == 1
    assert bad.returncode == 2 and "adapter-c" in bad.stderr and "adapter-a" in bad.stderr  # the engine lists both
    assert "Traceback" not in bad.stderr and not (tmp_path / "bad").exists()
    publish_and_verify(runs[-1], tmp_path / "bundle")
