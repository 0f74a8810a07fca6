"""ExampleConnector names a prompt's folder by its token ids cut to whole blocks of the engines' block size: `serve`
knows that size (the profile's, else the engine's pick for the model) and tells the relay (`--kv-block-size`); only
a relay started by hand without it tries the usual sizes (issue #37)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadproof.config.profile import parse_profile
from loadproof.errors import UsageError
from loadproof.planner.profile_plan import known_block_size
from loadproof.relay.prefill import GUESSED_BLOCK_SIZES, PrefillConfig, stored_bytes
from loadproof.relay.serve import relay_config
from loadproof.supervisor import serving

RELAY = dict(max_in_flight=8, deadline_s=30, heartbeat_s=2, max_body_mib=1, body_timeout_s=5, keys_file=None)


def pair(storage: str, **kv_cache: object) -> dict:
    return {
        "name": "pair",
        "engine": "vllm",
        "model": {"path": "/nowhere/model", "served_name": "m", "max_model_len": 4096},
        "serving": {"port": 8080},
        "kv_cache": kv_cache,
        "disaggregation": {"storage_path": storage, "prefill": {"port": 8100}, "decode": {"port": 8200}},
    }


def folder_of(storage: Path, ids: list[int], block: int) -> Path:
    """The folder ExampleConnector writes for a prompt at `block` tokens a block, with a file of 100 bytes."""
    keep = (len(ids) - 1) // block * block
    folder = storage / hashlib.md5(b"".join(i.to_bytes(8, "little") for i in ids[:keep])).hexdigest()
    folder.mkdir()
    (folder / "model.layers.0.self_attn.attn.safetensors").write_bytes(b"x" * 100)
    return folder


def test_a_known_block_size_names_the_one_folder_and_is_never_guessed(tmp_path: Path):
    ids = list(range(200, 300))  # 100 tokens: block 16 keeps 96, block 32 keeps 96 too, block 64 keeps 64
    folder_of(tmp_path, ids, 16)  # another prompt's (or another cut's) folder, which a guess at 16 would take
    assert stored_bytes(str(tmp_path), ids) == 100  # the guess: 16 first
    assert stored_bytes(str(tmp_path), ids, 64) is None  # told 64: the 64-token cut has no folder yet
    folder_of(tmp_path, ids, 64)
    assert stored_bytes(str(tmp_path), ids, 64) == 100
    assert 64 in GUESSED_BLOCK_SIZES


def test_the_relay_takes_the_block_size_for_its_storage_folder_only():
    config = relay_config(
        "http://d", prefill_upstream="http://p", kv_storage=Path("/dev/shm/kv"), kv_block_size=32, **RELAY
    )
    assert config.prefill == PrefillConfig("http://p", "ExampleConnector", "/dev/shm/kv", 32)
    guessed = relay_config("http://d", prefill_upstream="http://p", kv_storage=Path("/dev/shm/kv"), **RELAY)
    assert guessed.prefill is not None and guessed.prefill.block_size is None
    for bad in ({"kv_block_size": 16}, {"kv_block_size": 0, "kv_storage": Path("/dev/shm/kv")}):
        with pytest.raises(UsageError, match="--kv-block-size"):
            relay_config("http://d", prefill_upstream="http://p", **bad, **RELAY)  # type: ignore[arg-type]  # bad mixes an int and a Path


def test_the_block_size_serve_knows(tmp_path: Path):
    assert known_block_size(parse_profile(pair("/kv", block_size=32), "t")) == 32  # the profile's
    # vLLM on a GPU picks by the model's attention: without its config here, nothing is claimed
    assert known_block_size(parse_profile(pair("/kv"), "t")) is None
    model = tmp_path / "model"
    model.mkdir()
    config = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 256}
    (model / "config.json").write_text(json.dumps(config))
    profile = pair("/kv")
    profile["model"]["path"] = str(model)
    assert known_block_size(parse_profile(profile, "t")) == 16
    (model / "config.json").write_text(json.dumps({**config, "kv_lora_rank": 512, "qk_rope_head_dim": 64}))
    assert known_block_size(parse_profile(profile, "t")) == 64  # MLA: FlashMLA's
    # the embedded engine (vLLM's CPU build) picks 128 whatever the model
    assert known_block_size(parse_profile({**pair("/kv"), "engine": "embedded"}, "t")) == 128


def test_the_packaged_pairs_dry_run_tells_the_relay_its_block_size():
    path = resources.files("loadproof") / "profiles" / "embedded-pd.toml"
    out = subprocess.run(
        [sys.executable, "-m", "loadproof", "serve", str(path), "--dry-run"], capture_output=True, text=True, timeout=60
    ).stdout
    relay = next(line for line in out.splitlines() if line.startswith("loadproof relay "))
    assert relay.endswith("--kv-storage /dev/shm/loadproof-kv --kv-block-size 128"), relay


def test_serve_gives_the_in_process_relay_the_profiles_block_size(tmp_path: Path, monkeypatch):
    seen: dict[str, PrefillConfig | None] = {}

    def relay(supervisors, state, upstream, prefill, *rest):
        seen["prefill"] = prefill
        return "stopped"

    monkeypatch.setattr(serving, "Supervisor", lambda **_: SimpleNamespace(state="stopped"))
    monkeypatch.setattr(serving, "serve_with_relay", relay)
    profile = parse_profile(pair(str(tmp_path / "kv"), block_size=32), "t")
    serving.serve(
        profile, serving.ServeOptions(out=tmp_path / "runs"), print, print, lambda _: contextlib.nullcontext()
    )
    prefill = seen["prefill"]
    assert prefill is not None and prefill.block_size == 32 and prefill.kv_storage.startswith(str(tmp_path / "kv"))
