"""A fleet's members: each replica as a plain profile, the router's command line and where its executable is found,
`--router-policy`, and the memory estimate that refuses a replica count the host cannot hold."""

import os
from pathlib import Path

import pytest

from loadproof.config.profile import packaged_profile, parse_profile
from loadproof.engines import engines
from loadproof.engines.base import flag_value
from loadproof.engines.replicas import (
    ReplicaMemory,
    check_fleet_memory,
    replica_memory,
    replica_profile,
    replica_profiles,
    router_settings,
    weights_bytes,
    with_router_policy,
)
from loadproof.engines.router import RouterSettings, router_argv, router_executable
from loadproof.errors import UsageError

GIB = 1024**3
FLEET = {
    "name": "fleet",
    "engine": "vllm",
    "model": {"path": "/m", "served_name": "m", "max_model_len": 4096},
    "serving": {"port": 8090, "extra_args": ["--seed", "1"], "ready_timeout_s": 300},
    "replicas": {"count": 3, "ports": [9001, 9002, 9003], "gpus": ["0", "1", "2"]},
}


def argv(profile):
    return engines.get(profile.engine).launch_command(profile, "python3", profile.model.path, profile.serving.port).argv


def test_each_replica_is_the_profile_on_its_own_port_name_and_gpus():
    members = replica_profiles(parse_profile(FLEET, "test"))
    assert [m.name for m in members] == ["fleet-replica-1", "fleet-replica-2", "fleet-replica-3"]
    assert [m.serving.port for m in members] == [9001, 9002, 9003]
    assert [m.serving.env["CUDA_VISIBLE_DEVICES"] for m in members] == ["0", "1", "2"]
    for member in members:
        cmd = argv(member)
        assert member.replicas is None and flag_value(cmd, "--seed") == "1"
        assert cmd.count("--enable-scale-out") == 1  # vllm-router's cache_aware renders prompts on the replica


def test_without_ports_each_replica_gets_a_free_one_at_launch():
    data = {**FLEET, "replicas": {"count": 2}}
    member = replica_profile(parse_profile(data, "test"), 2)
    assert member.serving.port is None and "CUDA_VISIBLE_DEVICES" not in member.serving.env
    with pytest.raises(ValueError, match="replica 3 of 2"):
        replica_profile(parse_profile(data, "test"), 3)


def test_scale_out_is_asked_only_of_an_engine_that_has_it_and_only_for_vllm_router():
    sglang_router = {**FLEET, "replicas": {"count": 2, "router": "sglang-router"}}
    assert "--enable-scale-out" not in argv(replica_profile(parse_profile(sglang_router, "test"), 1))
    sim = {**FLEET, "engine": "sim", "model": {**FLEET["model"], "path": "sim"}, "replicas": {"count": 2}}
    assert "--enable-scale-out" not in argv(replica_profile(parse_profile(sim, "test"), 1))
    given = {**FLEET, "serving": {"extra_args": ["--enable-scale-out"]}}  # given already: not twice
    assert argv(replica_profile(parse_profile(given, "test"), 1)).count("--enable-scale-out") == 1


def test_the_router_command_carries_its_workers_ports_policy_and_thresholds():
    data = {**FLEET, "replicas": {**FLEET["replicas"], "policy": "cache_aware", "cache_threshold": 0.5}}
    data["replicas"] |= {
        "balance_abs_threshold": 8,
        "balance_rel_threshold": 1.25,
        "router_args": ["--log-level", "debug"],
    }
    settings = router_settings(parse_profile(data, "test"))
    urls = ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]
    cmd = router_argv("/venv/bin/vllm-router", settings, urls, "127.0.0.1", 8090, 29000)
    assert cmd[:3] == ["/venv/bin/vllm-router", "--host", "127.0.0.1"]
    at = cmd.index("--worker-urls")
    assert cmd[at + 1 : at + 3] == urls and cmd[at + 3] == "--policy"
    flags = {f: flag_value(cmd, f) for f in ("--port", "--policy", "--prometheus-port", "--prometheus-host")}
    assert flags == {
        "--port": "8090",
        "--policy": "cache_aware",
        "--prometheus-port": "29000",
        "--prometheus-host": "127.0.0.1",
    }
    assert flag_value(cmd, "--cache-threshold") == "0.5" and flag_value(cmd, "--balance-abs-threshold") == "8"
    assert flag_value(cmd, "--balance-rel-threshold") == "1.25"
    # it waits for the replicas at start as long as they may take, looking every second (its default: 30 s)
    assert flag_value(cmd, "--worker-startup-timeout-secs") == "300"
    assert flag_value(cmd, "--worker-startup-check-interval") == "1" and cmd[-2:] == ["--log-level", "debug"]


def test_sglang_router_is_launched_by_its_subcommand_without_unset_thresholds():
    cmd = router_argv("sglang-router", RouterSettings("sglang-router", "power_of_two"), ["http://a:1"], "h", 1, 2)
    assert cmd[:2] == ["sglang-router", "launch"] and "--cache-threshold" not in cmd


def test_a_policy_the_router_lacks_is_one_usage_line():
    with pytest.raises(UsageError, match=r"^sglang-router has no policy 'kv_aware' \(its policies: random,"):
        RouterSettings("sglang-router", "kv_aware")
    with pytest.raises(UsageError, match="router 'haproxy' is not one loadproof launches"):
        RouterSettings("haproxy", "round_robin")


def test_router_policy_replaces_the_profiles_and_is_checked():
    profile = packaged_profile("embedded-fleet")
    assert with_router_policy(profile, "cache_aware").replicas.policy == "cache_aware"
    assert with_router_policy(profile, None) is profile
    with pytest.raises(UsageError, match="--router-policy: vllm-router has no policy 'lru'"):
        with_router_policy(profile, "lru")
    with pytest.raises(UsageError, match="--router-policy is for a profile with \\[replicas\\]; embedded has none"):
        with_router_policy(packaged_profile("embedded"), "cache_aware")


def script(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_router_is_found_beside_the_running_python_then_on_path(tmp_path):
    venv, elsewhere = tmp_path / "venv" / "bin", tmp_path / "usr" / "bin"
    venv.mkdir(parents=True)
    elsewhere.mkdir(parents=True)
    python = str(venv / "python")
    on_path = script(elsewhere, "vllm-router")
    assert router_executable("vllm-router", python, lambda name: str(on_path)) == str(on_path)
    beside = script(venv, "vllm-router")
    assert router_executable("vllm-router", python, lambda name: str(on_path)) == str(beside)


def test_a_router_not_installed_says_what_installs_it(tmp_path):
    python = str(tmp_path / "python")
    with pytest.raises(UsageError) as caught:
        router_executable("vllm-router", python, lambda name: None)
    said = str(caught.value)
    assert said.endswith("pip install 'loadproof[router]'") and "vllm-router is not installed" in said
    assert "\n" not in said
    with pytest.raises(UsageError, match="pip install sglang-router$"):
        router_executable("sglang-router", python, lambda name: None)


# -- memory ----------------------------------------------------------------------------------------------------


def test_an_embedded_replica_holds_its_kv_weights_and_the_measured_runtime():
    member = replica_profile(packaged_profile("embedded-fleet"), 1)
    each = replica_memory(member, weights=GIB // 2)
    runtime = engines.get("embedded").host_runtime_gib
    assert runtime is not None and 2 < runtime < 6
    assert (each.kv_gib, each.weights_gib, each.runtime_gib) == (1.0, 0.5, runtime)
    assert each.total_gib == pytest.approx(1.5 + runtime)


def test_a_gpu_replica_counts_only_what_it_puts_in_host_memory():
    data = {**FLEET, "kv_cache": {"offload_gib": 16}, "cpu_offload_gib": 2, "parallel": {"tensor": 2}}
    each = replica_memory(replica_profile(parse_profile(data, "test"), 1), weights=40 * GIB)
    assert (each.kv_gib, each.weights_gib, each.runtime_gib) == (20.0, 0.0, None)  # weights on the GPUs
    assert "runtime not counted" in each.parts()


def test_too_many_replicas_is_one_line_naming_the_count_the_estimate_and_the_host():
    each = ReplicaMemory(kv_gib=1.0, weights_gib=0.5, runtime_gib=3.6)
    check_fleet_memory(2, each, available_bytes=12 * GIB, total_bytes=24 * GIB)  # 10.2 GiB fits
    with pytest.raises(UsageError) as caught:
        check_fleet_memory(3, each, available_bytes=12 * GIB, total_bytes=24 * GIB)
    said = str(caught.value)
    assert said == (
        "[replicas] count = 3: this host cannot hold them: about 3 x 5.1 GiB (1.0 KV + 0.5 weights + 3.6 runtime) "
        "= 15.3 GiB, and it has 12.0 GiB available of 24.0 GiB; lower the count or each replica's KV cache"
    )
    check_fleet_memory(30, each, available_bytes=None, total_bytes=None)  # a host that does not say: not checked


def test_weights_are_the_weight_files_of_a_local_folder(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "shard.bin").write_bytes(b"x" * 24)
    assert weights_bytes(str(tmp_path)) == 1024
    assert weights_bytes("org/some-hub-model") is None and weights_bytes(os.devnull) is None
