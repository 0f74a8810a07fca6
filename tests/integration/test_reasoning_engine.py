"""A reasoning model on the real embedded engine: vLLM's CPU build serving Gemma 3 270M with a reasoning
parser, so the engine itself streams reasoning and answer apart.

Gemma 3's vocabulary has no `<think>` token, so vLLM's token-based parsers (deepseek_r1, qwen3, ...) refuse to
start on it, and olmo3's needs GPT-2 style pieces it lacks; `granite` parses text ("Here is my thought
process:" ... "Here is my response:"). A chat template that shows the base model three worked examples in
that form when thinking is on (`tests/fixtures/reasoning/thinking-template.jinja`) makes it write its
answers the same way, and the parser splits them into `delta.reasoning` and `delta.content`. `run load
--thinking on` then yields the reasoning claims from the engine's own streams, and `--thinking off` (the
template's examples without thoughts) none; the crosscheck still holds, and the bundle verifies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.bundles import publish_and_verify
from tests.integration.conftest import start_serve, stop_serve

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "reasoning" / "thinking-template.jinja"
PROFILE = f"""
name = "embedded-reasoning"
engine = "embedded"

[model]
path = "embedded:gemma3-270m"
served_name = "gemma-3-270m"
dtype = "bfloat16"
max_model_len = 4096

[serving]
endpoint = "chat"
ready_timeout_s = 900
extra_args = ["--reasoning-parser", "granite", "--chat-template", "{TEMPLATE}"]
env = {{ VLLM_CPU_KVCACHE_SPACE = "2", VLLM_CPU_OMP_THREADS_BIND = "0-1", VLLM_CPU_NUM_OF_RESERVED_CPU = "0" }}
"""
N = 8  # prompts of 192 tokens: the template's worked examples take 118 of them with thinking on, 58 off


def run_load(url: str, out: Path, *args: str) -> tuple[int, dict, Path]:
    proc = subprocess.run(
        [sys.executable, "-m", "loadproof", "run", "load", "--url", url, "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    runs = sorted(out.glob("load-*"))
    assert runs and (runs[-1] / "claims.json").is_file(), proc.stderr[-2000:]
    claims = {c["name"]: c for c in json.loads((runs[-1] / "claims.json").read_text())["claims"]}
    return proc.returncode, claims, runs[-1]


def test_the_engine_streams_reasoning_apart_and_the_claims_hold(tmp_path: Path):
    profile = tmp_path / "reasoning.toml"
    profile.write_text(PROFILE, encoding="utf-8")
    handle = start_serve([str(profile), "--eager"], tmp_path / "serve.stderr")
    try:
        common = [
            "--tokenizer",
            str(handle.engine.tokenizer),
            "--rate",
            "1",
            "--input-tokens",
            "192",
            "--output-tokens",
            "40",
            "--seed",
            "7",
        ]
        code, claims, run = run_load(handle.engine.url, tmp_path / "on", *common, "-n", str(N), "--thinking", "on")
        off_code, off_claims, _ = run_load(handle.engine.url, tmp_path / "off", *common, "-n", "3", "--thinking", "off")
    finally:
        stop_serve(handle)
    shown = {name: c["printed"] for name, c in claims.items() if ".reasoning." in name or "generation" in name}
    print(json.dumps(shown, indent=1))  # the must-show figures, with -s
    assert code == 0 and off_code == 0, (claims, off_claims)
    value = {name: c["value"] for name, c in claims.items()}
    assert value["load.failed_requests"] == 0
    # as far as the small model allows: some requests' reasoning streamed apart from their answers (3 of 8 on
    # 2026-12-01; the others came back without the template's markers, so nothing was split off)
    assert value["load.reasoning.requests"] >= 1
    assert value["load.reasoning.reasoning_tokens"] > 0 and value["load.reasoning.answer_tokens"] > 0
    # the engine counts reasoning inside its generated tokens, as usage.completion_tokens does; beside the run's
    # requests it served the supervisor's liveness probes (one token each), which its TTFT count shows
    probes = value["crosscheck.ttft_count.engine"] - value["crosscheck.ttft_count.client"]
    assert 0 <= value["crosscheck.generation_tokens.engine"] - value["crosscheck.generation_tokens.client"] <= probes
    records = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    reasoned = [r for r in records if r["reasoning_tokens"]]
    assert all(r["first_answer_ns"] is None or r["first_answer_ns"] > r["first_token_ns"] for r in reasoned)
    assert json.loads((run / "manifest.json").read_text())["target"]["thinking"] == "on"
    assert "Reasoning and answer" in (run / "report.md").read_text()
    publish_and_verify(run, tmp_path / "bundle")
    assert not [name for name in off_claims if ".reasoning." in name]
