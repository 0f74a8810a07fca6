"""The table behind docs/scenarios.md's "Measured" note of `run load --until-precision`: for each run directory
given, its requests and each figure's reached 95% half-width (as `metrics.precision` computes it, from the
records), and, for a fixed-count run, the fewest of its first requests (in the order they were sent) over
which every figure was already that precise: the count a fixed run would have needed at best.

    python scripts/precision_table.py --asked ttft_p50=5%,itl_p50=2% RUN_DIR...
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from loadproof.metrics.precision import estimates, met
from loadproof.plans import load_plan
from loadproof.plans.load import LoadPlan
from loadproof.records import RequestRecord
from loadproof.scenarios.load.precision import parse_precision
from loadproof.store.run_dir import load_run


def fewest(records: list[RequestRecord], asked: dict[str, float], slo: dict[str, float], step: int = 10) -> int | None:
    """The fewest first-sent records (a multiple of `step`) over which every figure asked is precise enough."""
    ordered = sorted(records, key=lambda r: r.intended_send_ns or r.send_ns)
    for n in range(step, len(ordered) + 1, step):
        if met(ordered[:n], asked, slo):
            return n
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--asked", required=True, help="the precision, as --until-precision takes it")
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    asked = parse_precision(args.asked)
    rows: dict[str, list[int]] = {"precision": [], "fixed": []}
    print("| run | stopped by | requests | " + " | ".join(f"{f} +/-%" for f in asked) + " | fewest first |")
    print("|---|---|---|" + "---|" * len(asked) + "---|")
    for path in args.runs:
        run = load_run(path)
        plan = load_plan(run)
        assert isinstance(plan, LoadPlan)
        slo = dict(plan.slo)
        records = run.records
        found = estimates(records, asked, slo)
        mode = "precision" if plan.until_precision else "fixed"
        first = fewest(records, asked, slo) if mode == "fixed" else None
        rows[mode].append(len(records))
        widths = " | ".join(f"{e.relative_pct:.2f}" if e.relative_pct is not None else "-" for e in found)
        stopped = "precision" if any(e.kind == "precision_stop" for e in run.events) else "ceiling"
        print(
            f"| {path.name} | {stopped if mode == 'precision' else 'fixed'} | {len(records)} | {widths} | {first or '-'} |"
        )
    for mode, counts in rows.items():
        if counts:
            print(
                f"{mode}: {len(counts)} runs, requests mean {statistics.fmean(counts):.0f}, min {min(counts)}, max {max(counts)}"
            )


if __name__ == "__main__":
    main()
