"""A profile's `[replicas]`: N instances of its engine behind a real router (`routing.ROUTERS`), which `loadproof
serve` launches and stops together (supervisor/fleet.py); each instance's own profile is engines/replicas.py's.

The profile's `serving.port` is the fleet's one endpoint: the router's (as a disaggregated pair's is its relay's).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from loadproof.config.base import StrictModel
from loadproof.routing import check_policy

# what loadproof itself passes to the router: `router_args` may not give them again
ROUTER_OWN_FLAGS = ("--host", "--port", "--worker-urls", "--policy", "--prometheus-host", "--prometheus-port")


class ReplicasSpec(StrictModel):
    """N instances of the profile's engine behind a router; the router's settings."""

    count: int = Field(ge=2, description="engine instances (replicas), each under a supervisor of its own")
    router: Literal["vllm-router", "sglang-router"] = Field(
        default="vllm-router",
        description="the router in front (installed from PyPI: pip install 'loadproof[router]' for vllm-router)",
    )
    policy: str = Field(
        default="round_robin",
        description="the router's policy (routing.ROUTER_POLICIES: vllm-router's random, round_robin, "
        "cache_aware, kv_aware, power_of_two, consistent_hash, sticky_least_loaded); `serve --router-policy` "
        "overrides it",
    )
    ports: list[int] | None = Field(default=None, description="each replica's port, one per replica; None: free ports")
    gpus: list[str] | None = Field(
        default=None,
        description='CUDA_VISIBLE_DEVICES of each replica, one per replica (e.g. ["0", "1"]); None: every '
        "replica sees the profile's GPUs",
    )
    prometheus_port: int | None = Field(
        default=None, ge=1, le=65535, description="the router's own metrics (its Prometheus port); None: a free port"
    )
    cache_threshold: float | None = Field(
        default=None, ge=0, le=1, description="cache_aware: the prefix match that keeps a request on its replica"
    )
    balance_abs_threshold: int | None = Field(
        default=None, ge=0, description="cache_aware balances load when max - min load is above this..."
    )
    balance_rel_threshold: float | None = Field(
        default=None, ge=1, description="...and max load is above min load times this"
    )
    router_args: list[str] = Field(default_factory=list, description="more router arguments, passed as they are")

    @model_validator(mode="after")
    def _sane(self) -> ReplicasSpec:
        check_policy(self.router, self.policy)  # its ValueError names the router's policies
        for field, values in (("ports", self.ports), ("gpus", self.gpus)):
            if values is not None and len(values) != self.count:
                raise ValueError(f"replicas.{field} has {len(values)} entries for {self.count} replicas")
        if self.ports is not None:
            bad = [p for p in self.ports if not 1 <= p <= 65535]
            if bad:
                raise ValueError(f"replicas.ports: {bad[0]} is not a port")
            if len(set(self.ports)) != len(self.ports):
                raise ValueError("replicas.ports gives one port twice: give each replica its own")
        own = [a for a in self.router_args if a.split("=", 1)[0] in ROUTER_OWN_FLAGS]
        if own:
            raise ValueError(
                f"replicas.router_args: {own[0]} is set by loadproof (the profile's port, replicas.ports, "
                "replicas.policy, replicas.prometheus_port)"
            )
        return self

    def taken_ports(self, fleet_port: int | None) -> list[tuple[int, str]]:
        """Every port the profile names for the fleet, with whose it is: the router's (the profile's serving
        port), its Prometheus port, each replica's."""
        named = [(fleet_port, "the router ([serving] port)"), (self.prometheus_port, "replicas.prometheus_port")]
        named += [(p, f"replica {i}") for i, p in enumerate(self.ports or [], start=1)]
        return [(port, whose) for port, whose in named if port is not None]


def check_fleet_ports(spec: ReplicasSpec, fleet_port: int | None) -> None:
    """ValueError where the profile gives one port to two members of the fleet."""
    seen: dict[int, str] = {}
    for port, whose in spec.taken_ports(fleet_port):
        if port in seen:
            raise ValueError(f"port {port} is given to both {seen[port]} and {whose}: give each its own")
        seen[port] = whose
