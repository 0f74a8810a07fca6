"""Record telemetry alone for a while: `python -m loadproof.telemetry.record --seconds 60 --out FILE`.

Used on a GPU host while a workload runs (standard library, msgspec and nvidia-ml-py only).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import msgspec

from loadproof.telemetry.sampler import TelemetrySampler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    sampler = TelemetrySampler(args.out, args.interval_s, say=lambda s: print(s, file=sys.stderr))
    print(msgspec.json.encode(sampler.describe()).decode(), file=sys.stderr)
    with sampler:
        time.sleep(args.seconds)
    print(f"{sampler.num_samples} samples in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
