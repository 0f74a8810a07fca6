"""A profile's `[replicas]`: validated once, each mistake one line naming the field."""

import pytest

from loadproof.config.profile import packaged_profile, parse_profile
from loadproof.errors import ConfigError

FLEET = {
    "name": "fleet",
    "engine": "vllm",
    "model": {"path": "/m", "served_name": "m", "max_model_len": 4096},
    "serving": {"port": 8090},
    "replicas": {"count": 2},
}


def with_replicas(**replicas):
    return {**FLEET, "replicas": {"count": 2, **replicas}}


def test_the_defaults_are_two_replicas_behind_vllm_router_round_robin():
    spec = parse_profile(FLEET, "test").replicas
    assert spec is not None and (spec.count, spec.router, spec.policy) == (2, "vllm-router", "round_robin")
    assert spec.ports is None and spec.prometheus_port is None and spec.router_args == []


def test_the_packaged_fleet_is_two_embedded_replicas_on_the_chat_endpoint():
    profile = packaged_profile("embedded-fleet")
    assert profile.replicas is not None and profile.replicas.count == 2 and profile.replicas.policy == "round_robin"
    assert profile.serving.endpoint == "chat" and profile.serving.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert profile.serving.extra_args[-2:] == ["--tool-call-parser", "hermes"] and profile.serving.enforce_eager


@pytest.mark.parametrize(
    ("replicas", "said"),
    [
        ({"count": 1}, "replicas.count: Input should be greater than or equal to 2"),
        ({"policy": "least_busy"}, "vllm-router has no policy 'least_busy' (its policies: random, round_robin,"),
        ({"router": "sglang-router", "policy": "consistent_hash"}, "sglang-router has no policy 'consistent_hash'"),
        ({"router": "nginx"}, "replicas.router: Input should be 'vllm-router' or 'sglang-router'"),
        ({"ports": [9001]}, "replicas.ports has 1 entries for 2 replicas"),
        ({"ports": [9001, 9001]}, "replicas.ports gives one port twice"),
        ({"ports": [9001, 70000]}, "70000 is not a port"),
        ({"gpus": ["0"]}, "replicas.gpus has 1 entries for 2 replicas"),
        ({"ports": [8090, 9002]}, "port 8090 is given to both the router ([serving] port) and replica 1"),
        ({"prometheus_port": 9002, "ports": [9001, 9002]}, "port 9002 is given to both replicas.prometheus_port"),
        ({"router_args": ["--policy=cache_aware"]}, "replicas.router_args: --policy=cache_aware is set by loadproof"),
        ({"cache_threshold": 1.5}, "replicas.cache_threshold: Input should be less than or equal to 1"),
        ({"balance_rel_threshold": 0.5}, "replicas.balance_rel_threshold"),
        ({"count": 2, "workers": 3}, "replicas.workers: Extra inputs are not permitted"),
    ],
)
def test_a_fleet_that_cannot_run_is_one_line(replicas, said):
    with pytest.raises(ConfigError) as caught:
        parse_profile(with_replicas(**replicas), "fleet.toml")
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith("fleet.toml: ")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"disaggregation": {"storage_path": "/dev/shm/kv"}}, "[replicas] and [disaggregation] do not go together"),
        ({"parallel": {"tensor": 2, "nodes": 2}}, "[replicas] runs its instances on one host"),
    ],
)
def test_a_fleet_is_neither_a_pair_nor_multi_node(change, said):
    with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("]", r"\]")):
        parse_profile({**FLEET, **change}, "test")


def test_every_policy_of_each_router_is_taken():
    for router, policies in (("vllm-router", ["cache_aware", "consistent_hash"]), ("sglang-router", ["cache_aware"])):
        for policy in policies:
            assert parse_profile(with_replicas(router=router, policy=policy), "test").replicas.policy == policy
