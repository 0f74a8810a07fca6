"""Scale-out workers as Ray tasks (`--ray-address ADDR`, the loadproof[ray] extra): one task per worker,
each pinned to a node of the cluster, running the same `worker.run_worker`; a `RayHub` actor carries the
stop flag and what the tasks post as they run. Ray is imported only where it is used: loadproof runs
without it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.scenarios.live import LiveStatus
from loadproof.scenarios.load.scaleout.clock import ClockOffset
from loadproof.scenarios.load.scaleout.protocol import (
    CLOCK,
    READY_TIMEOUT_S,
    RECORDS,
    RESULT,
    STOP_TIMEOUT_S,
    Tail,
    WorkerJob,
    clock_json,
    encode,
    show,
)
from loadproof.scenarios.load.scaleout.worker import run_worker
from loadproof.store.run_dir import CHUNKS, REQUESTS

RAY_START_MARGIN_NS = 2_000_000_000  # Ray tasks are launched after the start is picked: more margin
CONNECT_TIMEOUT_S = 5.0  # the Ray cluster's address answers within this
PUMP_INTERVAL_S = 0.5  # a Ray task posts its new records (and reads the stop flag) this often


def ray_ready() -> tuple[str, int]:
    """A Ray task that imports this module (and, through it, the worker and the sender) on its node: the
    node's worker process is up before the start."""
    import ray  # optional (the loadproof[ray] extra); on a Ray node it is there

    return ray.get_runtime_context().get_node_id(), os.getpid()


class RayHub:
    """A Ray actor (no CPU) between the parent and its Ray tasks: the stop flag the parent raises when it is
    interrupted, and what each task posts as it runs (its clock, then its new request records), which the
    parent takes every half second for its live view and its spool. A task's complete records still come
    back as its return value; what was posted is what the parent keeps if a task never returns."""

    def __init__(self) -> None:
        self.stopped = False
        self.inbox: list[tuple[int, str, bytes]] = []

    def stop(self) -> None:
        self.stopped = True

    def post(self, worker: int, kind: str, data: bytes) -> bool:
        if data:
            self.inbox.append((worker, kind, data))
        return self.stopped

    def take(self) -> list[tuple[int, str, bytes]]:
        out, self.inbox = self.inbox, []
        return out


def ray_worker(job_bytes: bytes, api_key: str | None, start_wall_ns: int, hub: Any) -> tuple[bytes, bytes, bytes]:
    """The same `run_worker`, as a Ray task: the records are spooled to a temporary folder on the node,
    posted to the hub as they end, and returned (result, requests.jsonl, chunks.jsonl)."""
    import ray  # optional (the loadproof[ray] extra); on a Ray node it is there

    job = msgspec.msgpack.decode(job_bytes, type=WorkerJob)
    folder = Path(tempfile.mkdtemp(prefix="loadproof-worker-"))
    stop, done = threading.Event(), threading.Event()

    def on_clock(clock: ClockOffset, start_ns: int) -> None:
        ray.get(hub.post.remote(job.worker, "clock", clock_json(clock, start_ns)))

    def pump() -> None:  # new complete lines of requests.jsonl to the hub; the stop flag back
        pos = 0
        while True:
            finished = done.wait(PUMP_INTERVAL_S)
            data = b""
            with contextlib.suppress(OSError), open(folder / RECORDS / REQUESTS, "rb") as handle:
                handle.seek(pos)
                data = handle.read()
                data = data[: data.rfind(b"\n") + 1]
                pos += len(data)
            with contextlib.suppress(Exception):
                if ray.get(hub.post.remote(job.worker, "requests", data)):
                    stop.set()
            if finished:
                return

    pumper = threading.Thread(target=pump, name="loadproof-pump", daemon=True)
    pumper.start()
    try:
        result = run_worker(
            job,
            folder / RECORDS,
            api_key,
            start_wall_ns,
            node=ray.get_runtime_context().get_node_id(),
            on_clock=on_clock,
            stop=stop,
        )
        done.set()
        pumper.join()
        return (
            msgspec.json.encode(result),
            (folder / RECORDS / REQUESTS).read_bytes(),
            (folder / RECORDS / CHUNKS).read_bytes(),
        )
    finally:
        done.set()
        shutil.rmtree(folder, ignore_errors=True)


class RayTasks:
    """Ray tasks, one per worker, each pinned to a node of the cluster (round-robin over the alive nodes
    with a CPU), running `run_worker`."""

    how = "ray"

    def __init__(self, address: str) -> None:
        self.address = address
        self.nodes: list[str] = []
        self.cpus: list[int] = []
        self._taking: Any = None  # the hub's take() asked for and not yet answered

    def connect(self) -> None:
        try:
            import ray  # optional: the loadproof[ray] extra
        except ImportError:
            raise UsageError("--ray-address needs Ray, which is not installed: pip install 'loadproof[ray]'") from None
        host, port = _host_port(self.address)
        if port is not None:  # Ray's driver waits for an unreachable cluster for minutes: look first
            try:
                socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
            except OSError as exc:
                raise EnvironmentFailure(
                    f"cannot reach the Ray cluster at {self.address}: {exc.strerror or exc}"
                ) from None
        # a cluster of this machine's loopback; Any: ray.init takes `_node_ip_address` through its untyped **kwargs
        extra: dict[str, Any] = {"_node_ip_address": host} if host.startswith("127.") else {}
        try:
            ray.init(
                address=self.address,
                log_to_driver=False,
                logging_level=logging.ERROR,
                ignore_reinit_error=True,
                **extra,
            )
        except Exception as exc:
            raise EnvironmentFailure(
                f"cannot connect to the Ray cluster at {self.address}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
            ) from None
        nodes: Callable[[], list[dict[str, Any]]] = ray.nodes  # Ray leaves it unannotated; it returns one dict a node
        alive = [n for n in nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        self.nodes = [n["NodeID"] for n in alive]
        self.cpus = [int(n["Resources"]["CPU"]) for n in alive]
        if not self.nodes:
            self.close()
            raise EnvironmentFailure(f"the Ray cluster at {self.address} has no alive node with a CPU")

    def close(self) -> None:
        import ray  # optional (the loadproof[ray] extra); connect() found it

        with contextlib.suppress(Exception):
            ray.shutdown()

    def count(self, asked: int | None) -> int:
        """One task per node by default; more than the cluster's CPUs would start some tasks late."""
        if asked is not None and asked > sum(self.cpus):
            self.close()
            raise UsageError(
                f"--workers {asked}: the Ray cluster at {self.address} has {sum(self.cpus)} CPU(s) on "
                f"{len(self.nodes)} node(s); each worker task takes one"
            )
        return asked or len(self.nodes)

    async def run(
        self,
        jobs: list[WorkerJob],
        spools: list[Path],
        api_key: str | None,
        released: Callable[[int], None],
        live: LiveStatus,
        parent: ClockOffset,
    ) -> None:
        """Each task's result and records come back to SPOOL/result.json and SPOOL/records/."""
        import ray  # optional (the loadproof[ray] extra); connect() found it
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # the same optional Ray

        placement = [
            {"scheduling_strategy": NodeAffinitySchedulingStrategy(self._node_of(k), soft=False)}
            for k in range(len(jobs))
        ]
        ready = ray.remote(num_cpus=1, max_retries=0)(ray_ready)
        task = ray.remote(num_cpus=1, max_retries=0)(ray_worker)
        try:
            await asyncio.to_thread(ray.get, [ready.options(**p).remote() for p in placement], timeout=READY_TIMEOUT_S)
        except Exception as exc:
            raise EnvironmentFailure(f"the Ray tasks did not start on the cluster's nodes: {exc}") from None
        # Any, as `_take` and `ray_worker` take it: Ray's stubs give an actor's methods `.remote` only where
        # @ray.method decorates them, and RayHub is defined without importing Ray
        hub: Any = ray.remote(num_cpus=0)(RayHub).remote()
        for spool in spools:
            (spool / RECORDS).mkdir(parents=True)
        tails = [Tail(spool) for spool in spools]
        job_refs = [ray.put(encode(job)) for job in jobs]
        start_wall_ns = time.time_ns() + RAY_START_MARGIN_NS
        refs = [task.options(**p).remote(ref, api_key, start_wall_ns, hub) for p, ref in zip(placement, job_refs)]
        released(start_wall_ns)
        outs: list[Any] = [None] * len(refs)
        try:
            pending = list(refs)
            while pending:
                done, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1, timeout=PUMP_INTERVAL_S)
                for ref in done:
                    outs[refs.index(ref)] = ref
                await self._take(hub, spools, 0.0)
                show(live, tails, parent)
        except BaseException:
            with contextlib.suppress(Exception):  # every task records what it has in flight and returns
                hub.stop.remote()
            done, _ = await asyncio.to_thread(ray.wait, refs, num_returns=len(refs), timeout=STOP_TIMEOUT_S)
            for ref in done:
                outs[refs.index(ref)] = ref
            for ref, out in zip(refs, outs):
                if out is None:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
            raise
        finally:
            with contextlib.suppress(Exception):
                await self._take(hub, spools, STOP_TIMEOUT_S)
            for k, ref in enumerate(outs):
                if ref is not None:
                    _fetch(ray, ref, spools[k])
            show(live, tails, parent)

    def _node_of(self, k: int) -> str:
        """Task k's node: round-robin over the nodes, skipping a node whose CPUs are all taken."""
        slots = [node for turn in range(max(self.cpus)) for node, cpus in zip(self.nodes, self.cpus) if turn < cpus]
        return slots[k % len(slots)]

    async def _take(self, hub: Any, spools: list[Path], wait_s: float) -> None:
        """What the tasks posted, if the hub has answered within WAIT_S: a clock to SPOOL/clock.json, request
        lines appended to SPOOL/records/. On a busy machine the hub can answer late; its answer is then taken
        on a later round (asking again would lose the lines it already handed over)."""
        import ray  # optional (the loadproof[ray] extra); connect() found it

        if self._taking is None:
            self._taking = hub.take.remote()
        done, _ = await asyncio.to_thread(ray.wait, [self._taking], num_returns=1, timeout=wait_s)
        if not done:
            return
        posts, self._taking = ray.get(self._taking), None
        for worker, kind, data in posts:
            if kind == "clock":
                (spools[worker] / CLOCK).write_bytes(data)
            else:
                with open(spools[worker] / RECORDS / REQUESTS, "ab") as handle:
                    handle.write(data)


def _host_port(address: str) -> tuple[str, int | None]:
    """The GCS host and port of HOST:PORT or ray://HOST:PORT (no port: auto, or a name Ray resolves)."""
    rest = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return rest, None
    return host.strip("[]"), int(port)


def _fetch(ray: Any, ref: Any, spool: Path) -> None:
    """A finished Ray task's result and its complete records, written to its spool as a worker process leaves
    them (replacing the request lines posted as it ran, of which they are a prefix)."""
    try:
        result, requests, chunks = ray.get(ref)
    except Exception:
        return
    (spool / RECORDS).mkdir(parents=True, exist_ok=True)
    (spool / RECORDS / REQUESTS).write_bytes(requests)
    (spool / RECORDS / CHUNKS).write_bytes(chunks)
    (spool / RESULT).write_bytes(result)
