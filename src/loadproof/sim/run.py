"""Serving the simulator with uvicorn on one port, or a simulated fleet (`sim.fleet`) on its router's port, each
replica's and the router's metrics port; the `refuse` fault closes the listening sockets (a replica's: its own).

Every port is bound before anything is printed (a port another process holds is one line naming it, exit 2),
the simulated load (`load_s`) passes with the ports bound and closed, and "sim listening" is printed once it
listens. Ctrl-C or SIGTERM ends it with exit 130 and a line saying it stopped."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

from loadproof.errors import Interrupted, UsageError
from loadproof.protocol.ports import bind, listen
from loadproof.protocol.urls import base_url
from loadproof.routing import Router
from loadproof.sim.config import SimConfig
from loadproof.sim.fleet import SimFleet
from loadproof.sim.server import RequireKey, SimServer
from loadproof.sim.text import tokenizer_path


@dataclass(frozen=True)
class FleetPorts:
    """A simulated fleet's router (its policy's model) and the ports of its replicas and its metrics."""

    router: Router
    replica_ports: list[int]
    metrics_port: int


def fleet_ports(
    replicas: int, policy: str | None, port: int, replica_ports: str | None, metrics_port: int | None
) -> FleetPorts | None:
    """`loadproof sim --replicas N --router-policy P [--replica-ports A,B] [--router-metrics-port M]`: the fleet,
    its replicas on the ports after the router's by default and its metrics on the next; None: one engine."""
    if replicas < 1:
        raise UsageError(f"--replicas {replicas}: 1 or more")
    if replicas == 1:
        if policy is not None or replica_ports or metrics_port is not None:
            raise UsageError(
                "--router-policy, --replica-ports and --router-metrics-port serve a fleet: give --replicas 2 or more"
            )
        return None
    try:
        router = Router(policy or "round_robin", replicas)
    except ValueError as exc:
        raise UsageError(f"--router-policy: {exc}") from None
    try:
        given = [int(p) for p in replica_ports.split(",")] if replica_ports else None
    except ValueError:
        raise UsageError(f"--replica-ports {replica_ports!r}: ports, comma-separated") from None
    ports = given or [port + 1 + i for i in range(replicas)]
    if len(ports) != replicas:
        raise UsageError(f"--replica-ports gives {len(ports)} ports for {replicas} replicas")
    metrics = metrics_port if metrics_port is not None else port + replicas + 1
    every = [port, *ports, metrics]
    if len(set(every)) != len(every) or not all(0 < p < 65536 for p in every):
        raise UsageError(
            f"the fleet's ports must be distinct ports: router {port}, replicas {ports}, metrics {metrics}"
        )
    return FleetPorts(router, ports, metrics)


def serve(config: SimConfig, host: str, port: int, api_key: str | None = None, fleet: FleetPorts | None = None) -> None:
    ports = [port] if fleet is None else [port, *fleet.replica_ports, fleet.metrics_port]
    if fleet is None:
        sim = SimServer(config)
        app: Any = sim.app
        sims = [sim]
    else:
        fleet_app = SimFleet(config, fleet.router, host, port, fleet.replica_ports, fleet.metrics_port)
        app, sims = fleet_app, fleet_app.sims
    app = RequireKey(app, api_key) if api_key else app
    # on SIGTERM or Ctrl-C, streams in flight are cut at once, as vLLM's server task is cancelled on a signal
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="critical",
            access_log=False,
            lifespan="on",
            timeout_keep_alive=75,
            timeout_graceful_shutdown=0,
        )
    )

    def refuser(at: int | None) -> Any:
        def refuse() -> None:  # stop accepting: new connections are refused, open ones carry on
            listeners = getattr(server, "servers", [])
            for listener in listeners if at is None else listeners[at : at + 1]:
                listener.close()

        return refuse

    for i, one in enumerate(sims):  # a fleet's replica i listens on the (i + 1)-th socket
        one.on_refuse = refuser(None if fleet is None else i + 1)
    remedy, holder = "pass --port", "another simulator or engine?"
    socks: list[socket.socket] = []
    try:
        for p in ports:
            socks.append(bind(host, p, remedy, holder))
        if config.load_s:
            print(f"loading for {config.load_s / config.time_scale:g} s before listening", flush=True)
            time.sleep(config.load_s / config.time_scale)
        for sock in socks:
            listen(sock, remedy, holder)
        _say_listening(config, host, port, api_key)
        if fleet is not None:
            _say_fleet(host, fleet)
        asyncio.run(server.serve(sockets=socks))
    except KeyboardInterrupt:
        raise Interrupted("interrupted; the simulator stopped") from None
    finally:
        for sock in socks:
            sock.close()


def _say_fleet(host: str, fleet: FleetPorts) -> None:
    replicas = ", ".join(base_url(host, p) for p in fleet.replica_ports)
    print(
        f"sim fleet: {fleet.router.replicas} replicas ({replicas}) behind a model of vllm-router's "
        f"{fleet.router.policy}; the router's metrics at {base_url(host, fleet.metrics_port)}/metrics",
        flush=True,
    )


def _say_listening(config: SimConfig, host: str, port: int, api_key: str | None) -> None:
    print(
        f"sim listening on {base_url(host, port)}: model {config.model!r}, KV {config.kv_cache_tokens:,} tokens "
        f"({config.num_gpu_blocks:,} blocks of {config.block_size}), max_num_seqs {config.max_num_seqs}, "
        f"budget {config.max_num_batched_tokens} tokens/step, time x{config.time_scale:g}"
        + (f", faults {', '.join(config.faults.active)}" if config.faults.active else ""),
        flush=True,
    )
    print(f"tokenizer for exact-length prompts: {tokenizer_path()}", flush=True)
    if api_key:
        print("API key required on /v1", flush=True)
