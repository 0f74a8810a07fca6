"""Run the `loadproof` command with the garbage collector's pauses logged, or with the collector off.

    GCMODE=log|off scripts/in-venv python benchmarks/gc_wrap.py run load --url URL ...

At exit it prints (stderr) the collections by generation (count, total seconds) and the longest pauses.
Used once for docs/benchmarks.md section 9, to tell a collector pause from other stalls of the sender.
"""

import atexit
import gc
import os
import runpy
import sys
import time

mode = os.environ.get("GCMODE", "log")
pauses: list[tuple[int, float]] = []
started: dict[str, float] = {}


def on_gc(phase: str, info: dict) -> None:
    if phase == "start":
        started["t"] = time.perf_counter()
    else:
        pauses.append((info["generation"], time.perf_counter() - started.get("t", time.perf_counter())))


def report() -> None:
    longest = sorted(pauses, key=lambda p: -p[1])[:8]
    by = {g: (sum(1 for p in pauses if p[0] == g), round(sum(p[1] for p in pauses if p[0] == g), 4)) for g in (0, 1, 2)}
    print(
        f"GC {mode}: collections by generation (count, total s) {by}; longest (generation, ms) "
        f"{[(g, round(s * 1e3, 1)) for g, s in longest]}",
        file=sys.stderr,
    )


if mode == "off":
    gc.disable()
else:
    gc.callbacks.append(on_gc)
atexit.register(report)
sys.argv = ["loadproof", *sys.argv[1:]]
runpy.run_module("loadproof", run_name="__main__")
