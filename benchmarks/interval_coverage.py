"""Coverage of loadproof's 95% intervals (metrics/intervals.py): how often each contains the truth.

Many independent short samples from laws whose true percentiles, means and shares are known in closed
form, standing in for a run's figures: TTFT as a lognormal (p50, p99: order statistics), ITL as a gamma
(the mean: circular block bootstrap), E2E as a Weibull (p90: order statistics), SLO attainment as
Bernoulli draws (the share: Wilson and Clopper-Pearson), and a throughput-like per-second series as a
stationary AR(1) (its mean: circular block bootstrap, which must respect the correlation). For each figure,
the share of `--runs` 95% intervals that contain the true value, with its binomial 95% interval
(Clopper-Pearson, over the runs), and, for the order statistics, the exact coverage of the ranks used
(the binomial probability they bracket the quantile) and of each share interval (the binomial mass of the
counts whose interval holds the true share): what the share of runs should come out at.

Pure computation, no engine, no simulator; seeded (one --seed, the same table). The simulator-based
version (independent short runs of `loadproof sim` with a service-time law) is still to do (#41).

usage: scripts/in-venv python benchmarks/interval_coverage.py [--runs 1000] [--seed 41] [--resamples 2000]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from statistics import NormalDist

from loadproof.metrics.intervals import (
    Interval,
    binomial_cdf,
    block_bootstrap_mean,
    clopper_pearson_interval,
    long_run_mean_interval,
    order_statistic_ranks,
    percentile_interval,
    wilson_interval,
)

CONFIDENCE = 0.95
Draw = Callable[[random.Random, int], list[float]]  # (rng, n) -> a sample of n values
Z = NormalDist()


@dataclass(frozen=True)
class Case:
    figure: str
    law: str
    n: int
    truth: float
    draw: Draw
    interval: Callable[[list[float], int], Interval | None]  # (sample, run index) -> interval
    exact: float | None = None  # the exact coverage of an order-statistic interval


def lognormal(mu: float, sigma: float) -> Draw:
    return lambda rng, n: [rng.lognormvariate(mu, sigma) for _ in range(n)]


def ar1(mean: float, phi: float, sd: float) -> Draw:
    """x_t = mean + phi (x_{t-1} - mean) + e_t, e_t ~ N(0, sd), started in its stationary law."""

    def draw(rng: random.Random, n: int) -> list[float]:
        x = rng.gauss(mean, sd / math.sqrt(1.0 - phi * phi))
        out = []
        for _ in range(n):
            out.append(x)
            x = mean + phi * (x - mean) + rng.gauss(0.0, sd)
        return out

    return draw


def percentile_case(figure: str, law: str, n: int, q: float, truth: float, draw: Draw) -> Case:
    ranks = order_statistic_ranks(n, q, CONFIDENCE)
    exact = None if ranks is None else ranks.coverage
    return Case(figure, law, n, truth, draw, lambda xs, _i: percentile_interval(xs, q, CONFIDENCE), exact)


def bootstrap_case(figure: str, law: str, n: int, truth: float, draw: Draw, resamples: int) -> Case:
    def interval(xs: list[float], i: int) -> Interval | None:
        return block_bootstrap_mean(xs, CONFIDENCE, seed=i, resamples=resamples)

    return Case(figure, law, n, truth, draw, interval)


def long_run_case(figure: str, law: str, n: int, truth: float, draw: Draw) -> Case:
    return Case(figure, law, n, truth, draw, lambda xs, _i: long_run_mean_interval(xs, CONFIDENCE))


def share_case(figure: str, n: int, p: float, kind: Callable[[int, int, float], Interval]) -> Case:
    def draw(rng: random.Random, n: int) -> list[float]:
        return [1.0 if rng.random() < p else 0.0 for _ in range(n)]

    def covers(k: int) -> bool:
        interval = kind(k, n, CONFIDENCE)
        return interval.low <= p <= interval.high

    exact = sum(binomial_cdf(k, n, p) - binomial_cdf(k - 1, n, p) for k in range(n + 1) if covers(k))
    return Case(figure, f"Bernoulli({p})", n, p, draw, lambda xs, _i: kind(int(sum(xs)), len(xs), CONFIDENCE), exact)


def cases(resamples: int) -> list[Case]:
    mu, sigma = math.log(0.2), 0.5  # TTFT: median 200 ms
    ttft = lognormal(mu, sigma)
    ttft_law = "lognormal(ln 0.2, 0.5)"

    def ttft_q(q: float) -> float:
        return math.exp(mu + sigma * Z.inv_cdf(q))

    shape, scale = 1.5, 2.0  # E2E: Weibull
    e2e_p90 = scale * (-math.log(0.1)) ** (1.0 / shape)

    def e2e(rng: random.Random, n: int) -> list[float]:
        return [rng.weibullvariate(scale, shape) for _ in range(n)]

    def itl(rng: random.Random, n: int) -> list[float]:
        return [rng.gammavariate(2.0, 0.01) for _ in range(n)]

    return [
        percentile_case("TTFT p50", ttft_law, 100, 0.5, ttft_q(0.5), ttft),
        percentile_case("TTFT p50", ttft_law, 1000, 0.5, ttft_q(0.5), ttft),
        percentile_case("TTFT p99", ttft_law, 400, 0.99, ttft_q(0.99), ttft),
        percentile_case("TTFT p99", ttft_law, 1000, 0.99, ttft_q(0.99), ttft),
        percentile_case("E2E p90", f"Weibull(scale {scale}, shape {shape})", 300, 0.9, e2e_p90, e2e),
        bootstrap_case("ITL mean", "gamma(2, 0.01), independent", 300, 0.02, itl, resamples),
        share_case("attainment share, Wilson", 200, 0.9, wilson_interval),
        share_case("attainment share, Clopper-Pearson", 200, 0.9, clopper_pearson_interval),
        share_case("attainment share, Wilson", 50, 0.97, wilson_interval),
        share_case("attainment share, Clopper-Pearson", 50, 0.97, clopper_pearson_interval),
        long_run_case("ITL mean", "gamma(2, 0.01), independent", 300, 0.02, itl),
        *(
            make("throughput mean", f"AR(1) phi {phi} about 1000", n, 1000.0, ar1(1000.0, phi, 100.0))
            for phi, n in ((0.5, 300), (0.5, 1200), (0.8, 300), (0.8, 1200))
            for make in (partial(bootstrap_case, resamples=resamples), long_run_case)
        ),
    ]


def run_case(case: Case, runs: int, seed: int) -> tuple[int, float]:
    """How many of `runs` intervals contain the truth, and their mean half-width relative to the truth."""
    rng = random.Random(f"{seed}:{case.figure}:{case.law}:{case.n}")
    covered, widths = 0, 0.0
    for i in range(runs):
        interval = case.interval(case.draw(rng, case.n), i)
        if interval is None:
            raise SystemExit(f"{case.figure}: no interval at n={case.n}")
        covered += interval.low <= case.truth <= interval.high
        widths += (interval.high - interval.low) / 2.0 / case.truth
    return covered, widths / runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    print(
        "| figure | law | n | method | covered | share (its 95% interval) | exact coverage | mean half-width |",
        "|---|---|---|---|---|---|---|---|",
        sep="\n",
    )
    started = time.monotonic()
    for case in cases(args.resamples):
        covered, half = run_case(case, args.runs, args.seed)
        around = clopper_pearson_interval(covered, args.runs)
        method = case.interval(case.draw(random.Random(0), case.n), 0)
        name = "" if method is None else method.method.split(",")[0]
        exact = "" if case.exact is None else f"{case.exact:.2%}"
        print(
            f"| {case.figure} | {case.law} | {case.n:,} | {name} | {covered}/{args.runs} | {covered / args.runs:.1%} "
            f"({around.low:.1%}-{around.high:.1%}) | {exact} | {half:.1%} |",
            flush=True,
        )
    print(
        f"\n{args.runs} runs a figure, seed {args.seed}, {args.resamples} resamples, {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
