"""Routers that front a fleet of engine replicas (issue #40): which routers loadproof launches, the policies each
one has, and (to come) a model of how each policy assigns requests to replicas, shared by the fleet's expected
prefix hits (`metrics`) and the simulator's router (`sim`). Standard library only.

| router | package | policies |
|---|---|---|
| `vllm-router` | vllm-router (PyPI, Apache-2.0) | random, round_robin, cache_aware, kv_aware, power_of_two, consistent_hash, sticky_least_loaded |
| `sglang-router` | sglang-router (PyPI, Apache-2.0) | random, round_robin, cache_aware, power_of_two |

vllm-router's `consistent_hash` keys a request by the first of these headers it carries: X-Session-ID,
X-User-ID, X-Tenant-ID, X-Request-ID, X-Correlation-ID, X-Trace-ID (then body fields, then the body's hash);
it has no flag to name another. Its `cache_aware` renders each prompt on a replica
(`POST /v1/chat/completions/render`), which vLLM serves only when started with `--enable-scale-out`.
"""

from __future__ import annotations

ROUTER_POLICIES: dict[str, tuple[str, ...]] = {
    "vllm-router": (
        "random",
        "round_robin",
        "cache_aware",
        "kv_aware",
        "power_of_two",
        "consistent_hash",
        "sticky_least_loaded",
    ),
    "sglang-router": ("random", "round_robin", "cache_aware", "power_of_two"),
}
ROUTERS: tuple[str, ...] = tuple(ROUTER_POLICIES)
# the headers vllm-router's consistent_hash reads, in its order (lower case: HTTP header names are not case-sensitive)
SESSION_HEADERS: tuple[str, ...] = (
    "x-session-id",
    "x-user-id",
    "x-tenant-id",
    "x-request-id",
    "x-correlation-id",
    "x-trace-id",
)


def check_policy(router: str, policy: str) -> None:
    """ValueError naming the router's policies where `policy` is not one of them (or `router` is unknown)."""
    if router not in ROUTER_POLICIES:
        raise ValueError(f"router {router!r} is not one loadproof launches ({', '.join(ROUTERS)})")
    if policy not in ROUTER_POLICIES[router]:
        raise ValueError(f"{router} has no policy {policy!r} (its policies: {', '.join(ROUTER_POLICIES[router])})")
