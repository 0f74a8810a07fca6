"""Interleaved arms side by side: for each claim named, every run's value by arm (in run order), each arm's mean,
and the difference of the means with a 95% Welch interval (docs/gpu-validation.md).

usage: python scripts/gpu/abba_table.py ARM=RUN_DIR [ARM=RUN_DIR ...] --claims NAME,NAME,...
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

# two-sided 95% Student t quantiles by degrees of freedom (Welch's, rounded down)
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def claims_of(run: Path) -> dict[str, float]:
    data = json.loads((run / "claims.json").read_text(encoding="utf-8"))
    return {c["name"]: c["value"] for c in data["claims"] if isinstance(c["value"], (int, float))}


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """mean(b) - mean(a) and the half-width of its 95% interval."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se else 1
    return statistics.fmean(b) - statistics.fmean(a), _T95.get(max(1, int(df)), 1.96) * se


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="ARM=RUN_DIR, in the order they ran")
    parser.add_argument("--claims", required=True)
    args = parser.parse_args()
    arms: dict[str, list[dict[str, float]]] = {}
    for item in args.runs:
        arm, _, path = item.partition("=")
        arms.setdefault(arm, []).append(claims_of(Path(path)))
    (a, runs_a), (b, runs_b) = list(arms.items())[:2]
    print(f"| claim | {a} (each) | {b} (each) | {a} mean | {b} mean | {b} - {a}, 95% interval |")
    print("|---|---|---|---|---|---|")
    for name in args.claims.split(","):
        va = [r[name] for r in runs_a if name in r]
        vb = [r[name] for r in runs_b if name in r]
        if len(va) < 2 or len(vb) < 2:
            each_b = ", ".join(f"{v:.4g}" for v in vb)
            print(f"| `{name}` | {', '.join(f'{v:.4g}' for v in va) or '-'} | {each_b or '-'} | | | |")
            continue
        diff, half = welch(va, vb)
        print(
            f"| `{name}` | {', '.join(f'{v:.4g}' for v in va)} | {', '.join(f'{v:.4g}' for v in vb)} | "
            f"{statistics.fmean(va):.4g} | {statistics.fmean(vb):.4g} | {diff:+.4g} +- {half:.3g} |"
        )


if __name__ == "__main__":
    main()
