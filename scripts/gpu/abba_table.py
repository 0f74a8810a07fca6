"""Interleaved arms side by side, for run directories made one by one (by hand, or by validate.sh before
`loadproof run ab --scenario` made such a series and its table itself): for each figure, every run's value by arm
(in run order), each arm's mean with its Student t 95% interval, and B - A with Welch's 95% interval
("not distinguishable" when it contains 0). The table is the library's (`loadproof.report.between_runs`), the
one `run ab --scenario` writes into its folder's report.md; claims are recomputed from each run's records.

usage: python scripts/gpu/abba_table.py ARM=RUN_DIR [ARM=RUN_DIR ...] [--claims NAME,NAME,...] [--every]
(two arms, labelled as given, in the order they ran; default figures: the scenario's key figures)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from loadproof.metrics import compute_claims
from loadproof.report.between_runs import arms_table, figure_names, markdown_table, sides_of
from loadproof.store.run_dir import load_run


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("runs", nargs="+", help="ARM=RUN_DIR, in the order they ran")
    parser.add_argument("--claims", help="the figures, comma-separated (default: the scenario's key figures)")
    parser.add_argument("--every", action="store_true", help="every figure with a better direction")
    args = parser.parse_args()
    runs = []
    for item in args.runs:
        arm, _, path = item.partition("=")
        runs.append((arm, load_run(Path(path))))
    sides = sides_of(runs, compute_claims)
    if len(sides) != 2:
        parser.error(f"two arms, each ARM=RUN_DIR (got {len(sides)}: {', '.join(s.label for s in sides)})")
    names = args.claims.split(",") if args.claims else figure_names(sides, every=args.every)
    missing = [n for n in names if not (sides[0].samples.get(n) and sides[1].samples.get(n))]
    if missing:
        parser.error(f"not a figure of both arms: {', '.join(missing)}")
    print("\n".join(markdown_table(*arms_table(sides[0], sides[1], names))))


if __name__ == "__main__":
    main()
