"""A disaggregated profile's two instances (`[disaggregation]`), each as a plain profile the engine launches.

Both run the profile's model with vLLM's `--kv-transfer-config`: the prefill instance computes each prompt (one
token asked) and its KV connector saves the prompt's KV cache; the decode instance's connector finds and loads
it, and the decode instance streams the answer. The relay in front routes each request to both
(relay.prefill).

- ExampleConnector (vLLM's shared-storage example): both instances `kv_both` on one shared folder, where it
  writes each prompt's KV cache, layer by layer, under the md5 of its token ids, and never deletes it. It saves
  only what a request's first step computed, so the prefill instance runs without chunked prefill, with a
  batch budget of at least the context window. Two instances of it fit on one GPU.
- NixlConnector: GPU to GPU over NIXL (the nixl package), both `kv_both`, each with its own side-channel port
  (`VLLM_NIXL_SIDE_CHANNEL_PORT`); the relay hands the prefill instance's `kv_transfer_params` to the decode one.
"""

from __future__ import annotations

import json
from typing import Literal

from loadproof.config.profile import Profile, RoleSpec
from loadproof.engines import engines
from loadproof.errors import UsageError

Role = Literal["prefill", "decode"]
ROLES: tuple[Role, ...] = ("prefill", "decode")
NIXL_SIDE_CHANNEL_PORTS = {"prefill": 5600, "decode": 5601}


def role_profile(profile: Profile, role: Role) -> Profile:
    """The profile of one instance of `profile`'s pair: the role's settings over the profile's, and the
    connector's arguments; it has no `[disaggregation]` of its own."""
    pd = profile.disaggregation
    if pd is None:
        raise ValueError(f"profile {profile.name} has no [disaggregation]")
    if not engines.get(profile.engine).kv_transfer:
        raise UsageError(
            f"[disaggregation]: loadproof launches a prefill/decode pair on vLLM (its KV connectors), "
            f"not on {profile.engine}"
        )
    spec: RoleSpec = pd.prefill if role == "prefill" else pd.decode
    transfer: dict[str, object] = {"kv_connector": pd.connector, "kv_role": "kv_both"}
    env = dict(profile.serving.env)
    if pd.connector == "ExampleConnector":
        transfer["kv_connector_extra_config"] = {"shared_storage_path": pd.storage_path}
    else:
        env.setdefault("VLLM_NIXL_SIDE_CHANNEL_PORT", str(NIXL_SIDE_CHANNEL_PORTS[role]))
    if spec.gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = spec.gpus
    args = ["--kv-transfer-config", json.dumps(transfer, separators=(",", ":"))]
    batched = spec.max_num_batched_tokens or profile.scheduler.max_num_batched_tokens
    if role == "prefill" and pd.connector == "ExampleConnector":
        args.append("--no-enable-chunked-prefill")  # the connector saves what the first step computed: all of it
        batched = max(batched or 0, profile.model.max_model_len)
    serving = profile.serving.model_copy(
        update={
            "port": spec.port,  # the profile's own port is the pair's: the relay's
            "extra_args": [*profile.serving.extra_args, *args, *spec.extra_args],
            "env": env,
        }
    )
    kv = profile.kv_cache.model_copy(
        update={
            k: v
            for k, v in (
                ("budget_gib_per_gpu", spec.budget_gib_per_gpu),
                ("memory_utilization", spec.memory_utilization),
            )
            if v is not None
        }
    )
    scheduler = profile.scheduler.model_copy(update={"max_num_batched_tokens": batched})
    return profile.model_copy(
        update={
            "name": f"{profile.name}-{role}",
            "disaggregation": None,
            "serving": serving,
            "kv_cache": kv,
            "scheduler": scheduler,
        }
    )
