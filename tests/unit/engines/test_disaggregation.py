"""A disaggregated profile's two instances, rendered for vLLM, and the profile's refusals."""

import json
import subprocess
import sys
from importlib import resources

import pytest

from loadproof.config.profile import packaged_profile, parse_profile
from loadproof.engines import engines
from loadproof.engines.base import flag_value
from loadproof.engines.disaggregation import role_profile
from loadproof.errors import ConfigError, UsageError

PAIR = {
    "name": "pair",
    "engine": "vllm",
    "model": {"path": "/m", "served_name": "m", "max_model_len": 131072},
    "serving": {"port": 8080, "extra_args": ["--seed", "1"]},
    "scheduler": {"max_num_batched_tokens": 4096},
    "disaggregation": {
        "storage_path": "/dev/shm/kv",
        "prefill": {"port": 8100, "memory_utilization": 0.3, "budget_gib_per_gpu": 20},
        "decode": {"port": 8200, "memory_utilization": 0.4, "gpus": "1"},
    },
}


def argv(profile):
    return engines.get(profile.engine).launch_command(profile, "python3", profile.model.path, profile.serving.port).argv


def test_the_prefill_instance_runs_whole_prompts_and_both_share_the_connector_folder():
    profile = parse_profile(PAIR, "test")
    prefill, decode = role_profile(profile, "prefill"), role_profile(profile, "decode")
    p, d = argv(prefill), argv(decode)
    for cmd in (p, d):
        config = json.loads(flag_value(cmd, "--kv-transfer-config"))
        assert config == {
            "kv_connector": "ExampleConnector",
            "kv_role": "kv_both",
            "kv_connector_extra_config": {"shared_storage_path": "/dev/shm/kv"},
        }
        assert flag_value(cmd, "--seed") == "1"
    assert "--no-enable-chunked-prefill" in p and flag_value(p, "--max-num-batched-tokens") == "131072"
    assert "--no-enable-chunked-prefill" not in d and flag_value(d, "--max-num-batched-tokens") == "4096"
    assert flag_value(p, "--port") == "8100" and flag_value(d, "--port") == "8200"
    assert flag_value(p, "--gpu-memory-utilization") == "0.3" and flag_value(d, "--gpu-memory-utilization") == "0.4"
    assert flag_value(p, "--kv-cache-memory-bytes") == str(20 * 1024**3) and "--kv-cache-memory-bytes" not in d
    assert decode.serving.env["CUDA_VISIBLE_DEVICES"] == "1" and "CUDA_VISIBLE_DEVICES" not in prefill.serving.env
    assert prefill.disaggregation is None and decode.disaggregation is None


def test_nixl_gives_each_instance_its_side_channel_port():
    data = {**PAIR, "disaggregation": {"connector": "NixlConnector"}}
    profile = parse_profile(data, "test")
    prefill, decode = role_profile(profile, "prefill"), role_profile(profile, "decode")
    assert json.loads(flag_value(argv(prefill), "--kv-transfer-config"))["kv_connector"] == "NixlConnector"
    assert "--no-enable-chunked-prefill" not in argv(prefill)  # NIXL sends the blocks, chunked or not
    ports = {prefill.serving.env["VLLM_NIXL_SIDE_CHANNEL_PORT"], decode.serving.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]}
    assert len(ports) == 2


@pytest.mark.parametrize(
    "change, why",
    [
        ({"disaggregation": {"connector": "ExampleConnector"}}, "storage_path is ExampleConnector's shared folder"),
        ({"disaggregation": {"connector": "NixlConnector", "storage_path": "/x"}}, "storage_path"),
        ({"serving": {"runner": "pooling", "endpoint": "embeddings"}}, "a generating model on one host"),
    ],
)
def test_a_pair_that_cannot_run_is_one_line(change, why):
    with pytest.raises(ConfigError, match=why):
        parse_profile({**PAIR, **change}, "test")


def test_an_engine_without_kv_connectors_is_refused():
    with pytest.raises(UsageError, match="not on sglang"):
        role_profile(parse_profile({**PAIR, "engine": "sglang"}, "test"), "prefill")


def test_the_packaged_pair_dry_runs_both_instances_and_the_relay():
    assert packaged_profile("embedded-pd").disaggregation is not None
    path = resources.files("loadproof") / "profiles" / "embedded-pd.toml"
    out = subprocess.run(
        [sys.executable, "-m", "loadproof", "serve", str(path), "--dry-run"], capture_output=True, text=True, timeout=60
    ).stdout
    assert out.count("--kv-transfer-config") == 2 and out.count("--no-enable-chunked-prefill") == 1
    assert "loadproof relay --upstream http://127.0.0.1:8002 --prefill-upstream http://127.0.0.1:8001" in out
