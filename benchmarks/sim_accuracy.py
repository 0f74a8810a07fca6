"""How well the simulator, calibrated on single-request runs, predicts multi-session capacity runs.

One run, one engine: start the embedded engine, measure cold prefill at a few lengths and per-request
decode rates at a few concurrencies, calibrate a sim profile from those single-request runs only, then
measure capacity runs (N sessions x L tokens sent together) and set the simulator's prediction of each
beside the measurement. Prints a Markdown table; errors are (predicted - measured) / measured.

usage: scripts/in-venv python benchmarks/sim_accuracy.py [--out DIR] [--url URL --kv-tokens N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.resources import files
from pathlib import Path

from loadproof.metrics.capacity import evaluate_capacity
from loadproof.sim.config import load_sim_config
from loadproof.sim.virtual import predict_capacity

PREFILL_LENGTHS = (512, 2048, 4096, 8192)
CAPACITY = ((4, 2048), (8, 1024))
WINDOW_S = 20.0
FIGURES = ("cold_ttft_median_s", "cold_ttft_max_s", "window_aggregate_tokens_per_s")


def lp(*args: str) -> None:
    print("+ loadproof " + " ".join(args), file=sys.stderr, flush=True)
    subprocess.run(["loadproof", *args], check=True, stdout=subprocess.DEVNULL)


def newest(out: Path, scenario: str) -> Path:
    return sorted(out.glob(f"{scenario}-*"), key=lambda p: p.stat().st_mtime)[-1]


def start_engine(port: int, log: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(["loadproof", "serve", "--embedded", "--port", str(port)], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"engine exited; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            time.sleep(15)  # the supervisor's first probe, then quiet
            break
        except OSError:
            time.sleep(2)
    match = re.search(r"KV cache size: ([\d,]+) tokens", log.read_text())
    return proc, int(match.group(1).replace(",", "")) if match else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--url", default=None, help="an embedded engine already serving (else one is started)")
    parser.add_argument("--kv-tokens", type=int, default=0)
    parser.add_argument("--port", type=int, default=8317)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="sim-accuracy-"))
    out.mkdir(parents=True, exist_ok=True)
    proc = None
    url, kv_tokens = args.url, args.kv_tokens
    if url is None:
        proc, kv_tokens = start_engine(args.port, out / "engine.log")
        url = f"http://127.0.0.1:{args.port}"
    profile = Path(str(files("loadproof") / "profiles" / "embedded.toml"))
    from loadproof.engines.embedded import paths

    tokenizer = paths().model_dir / "tokenizer.json"
    common = ["--url", url, "--profile", str(profile), "--out", str(out)]
    long_context = [*common, "--tokenizer", str(tokenizer)]
    try:
        prefill_runs = []
        for length in PREFILL_LENGTHS:
            lp("run", "prefill", "-l", str(length), "-r", "2", "--decode-tokens", "64", *long_context)
            prefill_runs.append(newest(out, "prefill"))
        lp("run", "throughput", "--families", "english", "--concurrency", "1,2,4,8", "--max-tokens", "128",
           "--ignore-eos", *common)
        throughput = newest(out, "throughput")
        sim_profile = out / "sim-embedded.toml"
        lp("sim", "calibrate", *map(str, prefill_runs), str(throughput), "-o", str(sim_profile),
           *(["--kv-tokens", str(kv_tokens)] if kv_tokens else []))
        cfg = load_sim_config(sim_profile)
        rows = []
        for sessions, length in CAPACITY:
            lp("run", "capacity", "--sessions", str(sessions), "--input-tokens", str(length), "--window-s",
               str(WINDOW_S), *long_context)
            measured = {c["name"].split(".", 1)[1]: c["value"] for c in
                        json.loads((newest(out, "capacity") / "claims.json").read_text())["claims"]}
            pred = predict_capacity(cfg, sessions, length, WINDOW_S)
            predicted = {c.name.split(".", 1)[1]: c.value for c in
                         evaluate_capacity(pred.plan, pred.records, pred.samples, pred.events).claims}
            for figure in FIGURES:
                m, p = measured.get(figure), predicted.get(figure)
                err = f"{(p - m) / m:+.1%}" if isinstance(m, (int, float)) and isinstance(p, (int, float)) and m else "n/a"
                rows.append(f"| {sessions} x {length:,} | {figure} | {m:.2f} | {p:.2f} | {err} |"
                            if isinstance(m, (int, float)) and isinstance(p, (int, float)) else
                            f"| {sessions} x {length:,} | {figure} | {m} | {p} | n/a |")
            rows.append(f"| {sessions} x {length:,} | verdict | {measured.get('verdict')} | {predicted.get('verdict')} | |")
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
    print(f"calibrated on: {len(PREFILL_LENGTHS)} prefill lengths {PREFILL_LENGTHS} x 2 cold repeats, decode at "
          f"concurrency 1, 2, 4, 8 (128 tokens); profile {sim_profile}")
    print("| scenario | figure | measured | predicted | error |\n|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"run directories: {out}")


if __name__ == "__main__":
    main()
