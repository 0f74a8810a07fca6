"""The simulator as a registered engine kind, and the API key each engine's command line demands."""

from __future__ import annotations

import sys

import pytest

from loadproof.config.profile import parse_profile
from loadproof.engines import engines


def profile(engine: str, **sections: dict) -> object:
    data = {"name": "p", "engine": engine, "model": {"path": "sim", "served_name": "tiny", "max_model_len": 4096}}
    data.update(sections)
    return parse_profile(data, "test")


def test_a_sim_profile_renders_loadproof_sim_on_loadproofs_own_interpreter():
    cmd = engines.get("sim").launch_command(
        profile("sim", serving={"extra_args": ["--fault", "slow"]}), "python3", "sim", 8123
    )
    assert cmd.argv[:4] == [sys.executable, "-m", "loadproof", "sim"]
    joined = " ".join(cmd.argv)
    assert "--port 8123" in joined and "--served-model-name tiny" in joined and "--max-model-len 4096" in joined
    assert "--config" not in cmd.argv and cmd.argv[-2:] == ["--fault", "slow"] and not cmd.notes
    with_config = engines.get("sim").launch_command(profile("sim"), "python3", "/x/calibrated.toml", 8123)
    assert with_config.argv[-2:] == ["--config", "/x/calibrated.toml"]


def test_what_the_simulator_cannot_take_from_a_deployment_profile_is_refused_not_dropped():
    cmd = engines.get("sim").launch_command(
        profile("sim", parallel={"tensor": 2}, kv_cache={"dtype": "fp8"}), "python3", "sim", 8000
    )
    assert [n.split("[")[1].split("]")[0] for n in cmd.notes] == ["parallel", "kv_cache"]
    assert all(n.startswith("unsupported") for n in cmd.notes)


def test_gpu_needs_come_from_the_adapter():
    assert {name: engines.get(name).needs_gpus for name in engines.names()} == {
        "embedded": False,
        "sglang": True,
        "sim": False,
        "vllm": True,
    }


@pytest.mark.parametrize(
    "engine, argv, env, key",
    [
        ("vllm", ["--api-key", "k1"], {}, "k1"),
        ("vllm", ["--api-key=k2"], {}, "k2"),
        ("vllm", [], {"VLLM_API_KEY": "k3"}, "k3"),  # vLLM reads the environment too
        ("vllm", ["--api-key", "flag"], {"VLLM_API_KEY": "env"}, "flag"),
        ("vllm", [], {}, None),
        ("embedded", [], {"VLLM_API_KEY": "k4"}, "k4"),
        ("sglang", ["--api-key", "k5"], {}, "k5"),
        ("sglang", [], {"VLLM_API_KEY": "k6"}, None),
        ("sim", ["--api-key", "k7"], {}, "k7"),
    ],
)
def test_the_key_an_engine_demands(engine, argv, env, key):
    assert engines.get(engine).api_key(["python", "-m", "x", *argv], env) == key


def test_a_profile_gives_the_key_through_its_extra_args_or_its_environment():
    vllm = engines.get("vllm")
    by_flag = vllm.launch_command(profile("vllm", serving={"extra_args": ["--api-key", "s3"]}), "python3", "/m", 1)
    by_env = vllm.launch_command(profile("vllm", serving={"env": {"VLLM_API_KEY": "s4"}}), "python3", "/m", 1)
    assert vllm.api_key(by_flag.argv, by_flag.env) == "s3"
    assert vllm.api_key(by_env.argv, by_env.env) == "s4"
