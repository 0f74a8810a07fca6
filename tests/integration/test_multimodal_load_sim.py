"""`run load --images` and `--endpoint transcriptions --audio-s` against the simulator (a real process) whose
profile counts media tokens (`image_tokens`) and keeps a multimodal cache: the engine's prompt tokens agree
with the text's and `--media-tokens`', the cache hits what `--media-reuse` repeats and nothing else, and a
published bundle of the run verifies and holds no media (sizes, shapes and digests only; no base64)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard

from tests.integration.bundles import publish_and_verify
from tests.integration.sim_process import SimProcess
from tests.integration.test_scenarios_sim import run_scenario

pytestmark = pytest.mark.timeout(240)

BASE64_RUN = re.compile(rb"[A-Za-z0-9+/]{200,}")  # no file's base64 survives in a bundle
SIM = {"time_scale": 10.0, "image_tokens": "fixed:64", "audio_tokens": "per_s:50", "mm_cache_items": 256}


def values(claims: dict) -> dict:
    return {name: c["value"] for name, c in claims.items()}


def bundle_bytes(bundle: Path) -> list[tuple[Path, bytes]]:
    out = []
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".zst":
            data = zstandard.ZstdDecompressor().decompress(data)
        out.append((path, data))
    return out


def test_image_load_counts_media_tokens_claims_the_cache_and_publishes_no_media(tmp_path: Path):
    common = ["--endpoint", "chat", "--rate", "8", "-n", "20", "--input-tokens", "128", "--output-tokens", "8"]
    media = ["--images", "2:64x64,1:128x96", "--media-tokens", "fixed:64", "--seed", "3"]
    with SimProcess(tmp_path / "sim.log", config=SIM) as sim:
        code, fresh, _ = run_scenario(sim, tmp_path / "fresh", "load", *common, *media)
        assert code == 0, fresh
        code, reused, run = run_scenario(sim, tmp_path / "reused", "load", *common, *media, "--media-reuse", "0.5")
        assert code == 0, reused
    fresh, reused = values(fresh), values(reused)
    for got in (fresh, reused):
        assert got["load.media.requests"] == 20 and got["load.failed_requests"] == 0
        assert got["load.media.prompt_tokens_per_request.expected"] == 128 + 3 * 64
        assert got["load.media.prompt_tokens_per_request.engine"] == 128 + 3 * 64
        assert got["load.media.prompt_tokens_mismatched"] == 0
        assert got["load.media.pixels_per_request"] == 2 * 64 * 64 + 128 * 96
        assert got["load.media.engine_mm_cache_queries"] == 60
    assert fresh["load.media.reused_pct"] == 0 and fresh["load.media.engine_mm_cache_hits"] == 0
    assert reused["load.media.reused_pct"] == 50.0 and reused["load.media.mm_cache_hit_pct"] == 50.0
    publish_and_verify(run, tmp_path / "bundle")
    files = bundle_bytes(tmp_path / "bundle")
    assert any(b'"media_hashes"' in data for _, data in files)  # the digests go; the files never
    leaked = [str(path) for path, data in files if BASE64_RUN.search(data)]
    assert not leaked, leaked


def test_transcription_load_claims_audio_seconds_per_second_and_the_real_time_factor(tmp_path: Path):
    with SimProcess(tmp_path / "sim.log", config=SIM) as sim:
        code, claims, _ = run_scenario(
            sim,
            tmp_path,
            "load",
            "--endpoint",
            "transcriptions",
            "--audio-s",
            "1.5",
            "--rate",
            "8",
            "-n",
            "10",
            "--output-tokens",
            "8",
        )
    assert code == 0, claims
    got = values(claims)
    assert got["load.media.requests"] == 10 and got["load.failed_requests"] == 0
    assert got["load.media.audio_s_per_s"] > 0 and got["load.media.real_time_factor"] > 0
    assert got["load.media.bytes_per_request"] == 44 + 2 * 16_000 * 1.5  # a WAV header and 1.5 s of PCM16


def run_without_tokenizer(sim: SimProcess, out: Path, *args: str) -> tuple[int, dict[str, Any], Path, str]:
    """`loadproof run load` as the user typed it, with no --tokenizer: its exit code, claims, run and stdout."""
    argv = [sys.executable, "-m", "loadproof", "run", "load", "--url", sim.url, "--out", str(out), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=110)
    runs = sorted(out.glob("load-*"))
    assert runs and (runs[-1] / "claims.json").exists(), f"exit {proc.returncode}: {proc.stderr[-3000:]}"
    claims = {c["name"]: c for c in json.loads((runs[-1] / "claims.json").read_text())["claims"]}
    return proc.returncode, claims, runs[-1], proc.stdout


def test_a_transcription_load_on_a_profile_needs_no_tokenizer_and_takes_the_profiles_audio_rule(tmp_path: Path):
    """The colleague's command on embedded-asr's shape (the simulator serving whisper-tiny, vLLM's count of a
    transcription's prompt): no --tokenizer, no /tokenize asked, the profile's `audio_tokens` expected; the
    prompt tokens are not set beside the engine's counter (a transcription's usage counts the audio's frames);
    the run reports, publishes and verifies."""
    config = {**SIM, "model": "whisper-tiny", "audio_tokens": "per_s:100+4"}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        code, claims, run, out = run_without_tokenizer(
            sim, tmp_path / "runs", "--profile", "embedded-asr", "--endpoint", "transcriptions", "--audio-s", "2",
            "--rate", "8", "-n", "4", "--output-tokens", "8",
        )  # fmt: skip
    assert code == 0, out
    got = values(claims)
    assert got["load.media.requests"] == 4 and got["load.failed_requests"] == 0
    assert got["load.media.audio_s_per_s"] > 0
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["target"]["tokenizer_source"] is None  # no tokenizer, and the engine's /tokenize not asked
    media = manifest["plan"]["media"]
    assert media["tokens"] == "per_s:100+4" and media["tokens_source"] == "profile embedded-asr [model] audio_tokens"
    assert manifest["plan"]["input_tokens"]["kind"] == "none" and manifest["plan"].get("overhead_tokens") is None
    assert "crosscheck.prompt_tokens.diff_pct" not in got
    assert got["crosscheck.prompt_tokens.not_comparable"].startswith("not comparable: usage.prompt_tokens on the")
    assert "crosscheck.generation_tokens.diff_pct" in got  # every other pair stays
    publish_and_verify(run, tmp_path / "bundle")


def test_an_image_load_on_a_vlm_profile_expects_the_profiles_tokens_an_image(tmp_path: Path):
    """`run load --profile embedded-vlm --images 1:224x224`: 67 tokens an image (its [model] image_tokens) with no
    --media-tokens, the engine (the simulator, counting as idefics3-tiny does) agreeing."""
    config = {**SIM, "model": "idefics3-tiny", "image_tokens": "fixed:64+3"}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        code, claims, run = run_scenario(
            sim, tmp_path, "load", "--profile", "embedded-vlm", "--images", "1:224x224",
            "--rate", "8", "-n", "6", "--input-tokens", "128", "--output-tokens", "8",
        )  # fmt: skip
    assert code == 0, claims
    got = values(claims)
    assert got["load.media.prompt_tokens_per_request.expected"] == 128 + 67
    assert got["load.media.prompt_tokens_per_request.engine"] == 128 + 67
    assert got["load.media.prompt_tokens_mismatched"] == 0
    media = json.loads((run / "manifest.json").read_text())["plan"]["media"]
    assert media["tokens"] == "fixed:64+3" and media["tokens_source"] == "profile embedded-vlm [model] image_tokens"
