"""Benchmark: how fast the simulator plays a scenario on its virtual clock (modeled tokens per wall second).

    scripts/in-venv python benchmarks/sim_speed.py

Calibrates the reference deployment of docs/simulator.md (a cold 1,000,004-token prompt at 61.17 s to
first token, 416.32 tokens/s after it, KV 25,981,641 tokens, max_num_seqs 24, budget 8,192), then:
- times the whole command `loadproof plan ref.toml --simulate capacity --sessions 24 -l 1000004
  --window-s 60` (Python start-up included);
- runs the same prediction in this process and counts what it modeled: prompt tokens prefilled plus
  tokens decoded, over the wall time of the simulation alone.
It prints what it measured; it asserts nothing.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from loadproof.predict.capacity import predict_capacity
from loadproof.sim.config import load_sim_config

CALIBRATE = [
    "loadproof",
    "sim",
    "calibrate",
    "--ttft",
    "1000004:61.17",
    "--decode",
    "1:1000004:416.32",
    "--kv-tokens",
    "25981641",
    "--block-size",
    "16",
    "--max-num-seqs",
    "24",
    "--max-num-batched-tokens",
    "8192",
    "--max-model-len",
    "1048576",
]
SESSIONS, LENGTH, WINDOW_S = 24, 1_000_004, 60.0


def measure() -> dict[str, float | str]:
    profile = Path(tempfile.mkdtemp(prefix="sim-speed-")) / "ref.toml"
    subprocess.run([*CALIBRATE, "-o", str(profile)], check=True, stdout=subprocess.DEVNULL)
    plan = [
        "loadproof",
        "plan",
        str(profile),
        "--simulate",
        "capacity",
        "--sessions",
        str(SESSIONS),
        "-l",
        str(LENGTH),
        "--window-s",
        str(WINDOW_S).rstrip("0").rstrip("."),
    ]
    t0 = time.perf_counter()
    subprocess.run(plan, check=True, stdout=subprocess.DEVNULL)
    command_s = time.perf_counter() - t0

    config = load_sim_config(profile)
    t0 = time.perf_counter()
    pred = predict_capacity(config, SESSIONS, LENGTH, WINDOW_S)
    sim_s = time.perf_counter() - t0
    prefilled = sum(r.prompt_tokens or 0 for r in pred.records if r.first_token_ns is not None)
    decoded = sum(r.output_tokens or 0 for r in pred.records)
    row = {
        "command": " ".join(plan[:2] + ["ref.toml"] + plan[3:]),
        "command_s": command_s,
        "sim_s": sim_s,
        "modeled_s": pred.modeled_s,
        "steps": pred.num_steps,
        "prefilled": prefilled,
        "decoded": decoded,
        "tokens_per_s": (prefilled + decoded) / sim_s,
        "speedup": pred.modeled_s / sim_s,
    }
    print(
        f"`{row['command']}`: {command_s:.2f} s wall for the whole command; the simulation alone "
        f"{sim_s:.2f} s for {pred.modeled_s:,.1f} modeled seconds in {pred.num_steps:,} steps "
        f"({row['speedup']:,.0f}x real time): {prefilled:,} prompt tokens prefilled + {decoded:,} decoded = "
        f"{row['tokens_per_s']:,.0f} modeled tokens per wall second",
        flush=True,
    )
    return row


if __name__ == "__main__":
    measure()
