"""Benchmark: loadproof's client load spread over worker processes, on one host and through Ray.

    scripts/in-venv python benchmarks/multi_worker.py --url http://127.0.0.1:8088 [--streams 256]

Each worker is a process with its own event loop and StreamingClient, driving its share of the streams
and of the requests against the static nginx body (see serve_static_sse.sh); the workers start together
at an agreed wall-clock time. The aggregate rate is all responses over first start to last end.
- multiprocessing: 1 worker, then 2 workers, on this host;
- Ray: the same 1 and 2 workers as Ray tasks on a local Ray instance (`ray.init(num_cpus=2)`);
- Ray cluster: a cluster of two Ray nodes, each its own raylet, object store and worker pool, joined
  through the head's GCS over TCP, as hosts join (`ray.cluster_utils.Cluster`, Ray's own way to run a
  multi-node cluster on one machine). Each worker task is pinned to its own node by a custom resource,
  and reports the node id it ran on, so "2 workers" is one on each node. Across real hosts the code is
  the same; only the `ray start --address=...` on each host differs.
Ray is installed into /tmp/peers/ray the first time, and the tasks run with that environment's Python,
importing loadproof from this checkout.
It prints what it measured; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

RAY_VENV = Path("/tmp/peers/ray")
HERE = Path(__file__).resolve().parent


def worker(url: str, streams: int, requests: int, start_at: float) -> tuple[float, float, int, int]:
    """One worker's share: (wall start, wall end, responses, chunks). (A Ray task adds its node id.)"""
    from client_ceiling import consume  # imported here: a Ray task imports it on the worker's side

    time.sleep(max(0.0, start_at - time.time()))
    t0 = time.time()
    _, chunks = asyncio.run(consume(url, streams, requests))
    return t0, time.time(), requests, chunks


def _mp_worker(args: tuple[str, int, int, float], out: multiprocessing.Queue) -> None:
    out.put(worker(*args))


def aggregate(results: list[tuple[float, float, int, int]]) -> dict[str, float]:
    span = max(r[1] for r in results) - min(r[0] for r in results)
    return {
        "responses_per_s": sum(r[2] for r in results) / span,
        "chunks_per_s": sum(r[3] for r in results) / span,
        "seconds": span,
        "start_skew_s": max(r[0] for r in results) - min(r[0] for r in results),
    }


def run_processes(url: str, streams: int, requests: int, workers: int) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    start_at = time.time() + 2.0  # every process imported and waiting
    procs = [
        ctx.Process(target=_mp_worker, args=((url, streams // workers, requests // workers, start_at), out))
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    return aggregate(results)


def ensure_ray() -> Path | None:
    python = RAY_VENV / "bin" / "python"
    if not python.is_file() or subprocess.run([str(python), "-c", "import ray"], capture_output=True).returncode:
        print(f"  installing ray into {RAY_VENV} (one time) ...", flush=True)
        subprocess.run(["python3", "-m", "venv", str(RAY_VENV)], check=True)
        rc = subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "ray"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        ).returncode
        if rc:
            return None
    return python


def run_ray(url: str, streams: int, requests: int, counts: list[int]) -> dict[str, object] | str:
    """Run the Ray side in Ray's own environment: {"local"|"cluster": {workers: aggregate}, "cluster_nodes"},
    or why it could not run."""
    python = ensure_ray()
    if python is None:
        return "pip could not install ray into /tmp/peers/ray"
    site = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE), str(site)]),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
    }
    proc = subprocess.run(
        [
            str(python),
            str(HERE / "multi_worker.py"),
            "--ray-side",
            "--url",
            url,
            "--streams",
            str(streams),
            "--requests",
            str(requests),
            "--workers",
            ",".join(map(str, counts)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return f"Ray run failed (exit {proc.returncode}): {(proc.stderr.strip().splitlines() or [''])[-1][:200]}"
    return json.loads(lines[-1])


def _ray_worker(url: str, streams: int, requests: int, start_at: float) -> tuple[float, float, int, int, str]:
    import ray

    return (*worker(url, streams, requests, start_at), ray.get_runtime_context().get_node_id())


def _ray_rounds(url: str, streams: int, requests: int, counts: list[int], pinned: bool) -> dict[str, dict]:
    import ray

    def task(i: int):
        options = {"num_cpus": 1, "resources": {f"lp-node-{i}": 1}} if pinned else {"num_cpus": 1}
        return ray.remote(_ray_worker).options(**options)

    # start every worker process first: warm-up tasks that wait for a common start run side by side
    ray.get([task(i).remote(url, 1, 1, time.time() + 3.0) for i in range(max(counts))])
    out = {}
    for n in counts:
        start_at = time.time() + 1.0
        results = ray.get([task(i).remote(url, streams // n, requests // n, start_at) for i in range(n)])
        out[str(n)] = {**aggregate([r[:4] for r in results]), "nodes": len({r[4] for r in results})}
    return out


def ray_side(url: str, streams: int, requests: int, counts: list[int]) -> None:
    import ray
    from ray.cluster_utils import Cluster

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    local = _ray_rounds(url, streams, requests, counts, pinned=False)
    ray.shutdown()
    # a cluster of separate Ray nodes: a head and one more node, each with one CPU and a resource naming it
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"lp-node-0": 1}, "include_dashboard": False}
    )
    for i in range(1, max(counts)):
        cluster.add_node(num_cpus=1, resources={f"lp-node-{i}": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    nodes = sum(1 for n in ray.nodes() if n["Alive"])
    clustered = _ray_rounds(url, streams, requests, counts, pinned=True)
    ray.shutdown()
    cluster.shutdown()
    print(json.dumps({"local": local, "cluster": clustered, "cluster_nodes": nodes}))


def measure(url: str, streams: int, requests: int, counts: list[int]) -> dict[str, object]:
    rows: dict[str, object] = {"streams": streams, "requests": requests}
    for n in counts:
        rows[f"processes-{n}"] = r = run_processes(url, streams, requests, n)
        print(
            f"multiprocessing, {n} worker(s) x {streams // n} streams: {r['responses_per_s']:,.0f} responses/s "
            f"({r['chunks_per_s']:,.0f} chunks/s; starts within {r['start_skew_s'] * 1e3:.0f} ms)",
            flush=True,
        )
    ray_rows = run_ray(url, streams, requests, counts)
    if isinstance(ray_rows, str):
        rows["ray"] = ray_rows
        print(ray_rows, flush=True)
    else:
        rows["ray_cluster_nodes"] = ray_rows["cluster_nodes"]
        for how, label in (("local", "Ray tasks, local instance"), ("cluster", "Ray tasks, 2-node cluster")):
            for n, r in ray_rows[how].items():
                rows[f"ray-{how}-{n}"] = r
                print(
                    f"{label}, {n} worker(s) x {streams // int(n)} streams on {r['nodes']} node(s): "
                    f"{r['responses_per_s']:,.0f} responses/s ({r['chunks_per_s']:,.0f} chunks/s; starts within "
                    f"{r['start_skew_s'] * 1e3:.0f} ms)",
                    flush=True,
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--requests", type=int, default=8000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--ray-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    if args.ray_side:
        ray_side(args.url, args.streams, args.requests, counts)
    else:
        measure(args.url, args.streams, args.requests, counts)


if __name__ == "__main__":
    main()
