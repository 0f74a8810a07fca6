"""Coverage of loadproof's 95% intervals: how often the interval a claim carries contains the truth.

Part 1, the simulator (`--part sim`): the intervals the product publishes, computed by its own claim functions
(metrics/load.py `load_claims`, which calls latency_claims, slo_claims and rate_interval; the steady window's
rates by `open_loop_steady`, the window ending at the last send; the plan records its arrivals, as every run's
since, so a rescaled run's intervals are conditioned on each batch's arrivals, metrics/conditioning.py) on the
records of many independent short runs of the simulator's engine model on its virtual clock (predict/load.py `predict_load`: the scheduler and step cost
of `loadproof sim`, no HTTP, no sleeping), open-loop Poisson traffic at a rate, with random prompt and output
lengths. The records are taken in the order they ended, as a run directory keeps them. Two arrival designs:
`rescaled` (what `run load --rate R -n N` sends: N Poisson gaps rescaled so the last send is at N/R, vLLM's
schedule) and `poisson` (the same draw, not rescaled: a Poisson process of rate R). The truth of each figure
of a latency figure and of SLO attainment is the same figure over a few long runs (`--truth-runs` x
`--truth-requests`, Poisson, other seeds; each long run's value is printed, so their own spread can be read
against the short runs' interval widths); of the steady window's rate, the law's: a stable open loop completes
what it is sent, R x E[output tokens] tokens/s; of a whole run's rate (requests/s, output tokens/s: vLLM's, the
count over the run's duration, the drain included), the same figure's mean over the row's other runs, its
expectation under the design and the run's length, which the drain dilutes from the law's (the bias column is
against the law's R and R x E[output tokens]). The engine's steps carry a 5% jitter (`SimConfig.step_jitter`,
each run's own seed): without it ITL's percentiles are a lattice of a few step lengths.

Part 2, laws (`--part laws`): the interval methods on draws from laws whose truth is known in closed form:
independent values (order statistics, Wilson, Clopper-Pearson) and a stationary AR(1) latent series (the
correlated percentile and share intervals the claims use, batch means). Pure computation.

For each figure: runs with an interval, how many contain the truth, that share with its own 95% interval
(Clopper-Pearson over the runs), the intervals' mean half-width relative to the truth; for the simulator
also the figure's mean error against the truth (bias) and its spread over the runs (sd). Seeded: one
--seed, the same table.

usage: scripts/in-venv python benchmarks/interval_coverage.py [--part sim|laws|all] [--runs 500] [--seed 41]
           [--rates 8,10] [--designs rescaled,poisson] [--figures steady,ttft] [--requests 2000] [--truth-runs 4] [--truth-requests 50000] [--workers 2] [--json F]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from statistics import NormalDist

from loadproof.metrics.claims import Claim
from loadproof.metrics.dependence import correlated_percentile_interval, correlated_share_interval
from loadproof.metrics.intervals import (
    Interval,
    batch_means_interval,
    binomial_cdf,
    clopper_pearson_interval,
    order_statistic_ranks,
    percentile_interval,
    wilson_interval,
)
from loadproof.metrics.load import load_claims, open_loop_steady
from loadproof.plans.load import LoadLengths, LoadPlan
from loadproof.predict.load import predict_load
from loadproof.sim.config import CostModel, SimConfig
from loadproof.workloads.arrivals import ArrivalSpec, intended_offsets
from loadproof.workloads.synthetic import Lengths, draw_lengths, parse_lengths

CONFIDENCE = 0.95
Z = NormalDist()

# --- part 1: the simulator ------------------------------------------------------------------------------

# a small engine: 32 sequences, a 2,048-token step budget, a step of 10 ms + 20 us a prefill token + 0.5 ms a
# decoding sequence, 5 ms of request overhead; prompts lognormal (median 256, sigma 0.5), outputs lognormal
# (median 64, sigma 0.5): about 1,230 output tokens/s at 32 sequences, E2E about 1.2 s at 8 requests/s
JITTER = 0.05  # each step's time times a lognormal factor (log-sd 5%): without it ITL's percentiles are a lattice
ENGINE = SimConfig(
    max_num_seqs=32,
    max_num_batched_tokens=2048,
    cost=CostModel(step_overhead_s=0.01, prefill_s_per_token=2e-5, decode_s_per_seq=5e-4, request_overhead_s=0.005),
    step_jitter=JITTER,
)
INPUT, OUTPUT = "lognormal:256:0.5", "lognormal:64:0.5"
SLO = {"ttft": 0.06, "e2el": 2.5}
FIGURES = (  # (figure, claim): what the issue names, then a few more of the same kinds
    ("TTFT p50", "load.ttft_s.p50"),
    ("TTFT p99", "load.ttft_s.p99"),
    ("ITL mean", "load.itl_s.mean"),
    ("E2E p90", "load.e2el_s.p90"),
    ("SLO attainment", "load.slo_attainment_pct"),
    ("output tokens/s", "load.output_tokens_per_s"),
    ("requests/s", "load.request_throughput_rps"),
    ("ITL p50", "load.itl_s.p50"),
    ("E2E mean", "load.e2el_s.mean"),
    ("output tokens/s, steady window", "load.steady.output_tokens_per_s"),
)
Outcome = dict[str, tuple[float, tuple[float, float, str] | None]]  # claim -> (value, (low, high, method))


def lengths(text: str) -> tuple[Lengths, LoadLengths]:
    spec = parse_lengths(text)
    return spec, LoadLengths(kind=spec.kind, a=spec.a, b=spec.b, text=text)


def sim_run(task: tuple[float, int, int, bool]) -> Outcome:
    """One run: `n` requests at `rate` (rescaled or not), seed `seed`; each figure's value and interval."""
    rate, n, seed, rescale = task
    spec = ArrivalSpec(arrival="poisson", rate_rps=rate, num_requests=n)
    offsets = intended_offsets(spec, seed, rescale=rescale)
    (ins, in_plan), (outs, out_plan) = lengths(INPUT), lengths(OUTPUT)
    inputs = [max(1, x) for x in draw_lengths(ins, n, seed, "input")]
    outputs = [max(1, x) for x in draw_lengths(outs, n, seed, "output")]
    engine = ENGINE.model_copy(update={"seed": seed})  # each run's own step jitter
    records = sorted(predict_load(engine, offsets, inputs, outputs).records, key=lambda r: r.end_ns)
    plan = LoadPlan(
        arrival="poisson",
        rate_rps=rate,
        num_requests=n,
        seed=seed,
        planned_requests=n,
        rescaled=rescale,
        schedule_span_s=offsets[-1],
        input_tokens=in_plan,
        output_tokens=out_plan,
        slo=dict(SLO),
        steady_window=True,
        arrivals_known=True,
        ends_known=True,
    )
    claims: list[Claim] = load_claims(records, plan, [], []) + open_loop_steady(records, 0, plan)
    wanted = {claim for _, claim in FIGURES}
    out: Outcome = {}
    for c in claims:
        if c.name in wanted and isinstance(c.value, float):
            iv = c.interval
            out[c.name] = (c.value, None if iv is None else (iv.low, iv.high, iv.method))
    return out


@dataclass(frozen=True)
class Row:
    figure: str
    design: str
    rate: float
    runs: int  # runs with an interval
    none: int  # runs whose claim had no interval (too few values for it)
    covered: int
    half_width: float  # mean, relative to the truth
    bias: float  # mean relative error of the figure
    sd: float  # relative spread of the figure over runs
    method: str

    def cells(self) -> list[str]:
        share = self.covered / self.runs if self.runs else math.nan
        around = clopper_pearson_interval(self.covered, self.runs) if self.runs else None
        band = "" if around is None else f" ({around.low:.1%}-{around.high:.1%})"
        flag = "" if 0.93 <= share <= 0.97 else (" **below**" if share < 0.93 else " **above**")
        return [
            self.figure,
            self.design,
            f"{self.rate:g}",
            self.method,
            f"{self.covered}/{self.runs}" + (f" ({self.none} none)" if self.none else ""),
            f"{share:.1%}{band}{flag}",
            f"{self.half_width:.2%}",
            f"{self.bias:+.2%}",
            f"{self.sd:.2%}",
        ]


def method_kind(method: str) -> str:
    """A method's words without its counts (`order statistics 469 and 532 of 1000, effective count 88 ...`)."""
    effective = ", effective count" if "effective count" in method else ""
    effective += ", conditioned on arrivals" if "conditioned on each batch's arrivals" in method else ""
    effective += ", conditioned on the ends" if "conditioned on each second's ends" in method else ""
    effective += ", with the drain" if "the drain's spread" in method else ""
    for kind in ("order statistics", "Wilson score", "per-second series", "batch means"):
        if kind in method:
            return ("batch means of the per-second series" if kind == "per-second series" else kind) + effective
    return method


def summarize(
    figure: str, claim: str, design: str, rate: float, truth: float, outcomes: list[Outcome], own: bool = False
) -> Row:
    """A row; `own`: the truth each run is checked against is the figure's mean over the row's other runs (its
    expectation under the design), `truth` only the reference of the bias and the half-widths."""
    got = [o[claim] for o in outcomes if claim in o]
    with_iv = [(v, iv) for v, iv in got if iv is not None]
    total = math.fsum(v for v, _ in got)
    # a bound equal to the truth within 1e-9 relative counts as holding it (an atom reached by different sums)
    slack = 1e-9 * abs(truth)

    def holds(value: float, low: float, high: float) -> bool:
        target = (total - value) / (len(got) - 1) if own else truth
        return low - slack <= target <= high + slack

    covered = sum(holds(v, low, high) for v, (low, high, _) in with_iv)
    half = sum((high - low) / 2 / truth for _, (low, high, _) in with_iv) / max(1, len(with_iv))
    values = [v for v, _ in got]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1))
    kinds = sorted({method_kind(m) for _, (_, _, m) in with_iv})
    return Row(
        figure,
        design,
        rate,
        len(with_iv),
        len(got) - len(with_iv),
        covered,
        half,
        mean / truth - 1,
        sd / truth,
        "; ".join(kinds) or "none",
    )


def mean_length(text: str) -> float:
    """E[max(1, round(X))] of a lognormal length spec (as `draw_lengths` rounds it and the run clamps it to 1)."""
    spec = parse_lengths(text)
    mu, sigma = math.log(spec.a), spec.b

    def below(x: float) -> float:  # P(X < x)
        return Z.cdf((math.log(x) - mu) / sigma)

    top = math.ceil(math.exp(mu + 12 * sigma))
    return below(1.5) + sum(k * (below(k + 0.5) - below(k - 0.5)) for k in range(2, top))


# a stable open loop completes what it is sent: the long-run rates are the law's (the reference of the rates' bias)
LAW_RATES = {
    "load.request_throughput_rps": lambda rate: rate,
    "load.output_tokens_per_s": lambda rate: rate * mean_length(OUTPUT),
    "load.steady.output_tokens_per_s": lambda rate: rate * mean_length(OUTPUT),
}
# a whole run's rate (vLLM's: the count over the run's duration, its drain included) estimates that figure's
# expectation under the design and the run's length, not the long-run rate: its truth is its mean over the other runs
WHOLE_RUN_RATES = {"load.request_throughput_rps", "load.output_tokens_per_s"}


def sim_part(args: argparse.Namespace) -> tuple[list[Row], list[dict[str, object]]]:
    rows: list[Row] = []
    truths: list[dict[str, object]] = []
    figures = [(f, c) for f, c in FIGURES if not args.figures or any(w in c for w in args.figures)]
    with Pool(args.workers) as pool:
        for rate in args.rates:
            seeds = [10**6 + args.seed * 100 + k for k in range(args.truth_runs)]
            longs = pool.map(sim_run, [(rate, args.truth_requests, seed, False) for seed in seeds])
            truth = {}
            for _, claim in figures:
                vals = [o[claim][0] for o in longs if claim in o]
                mean = sum(vals) / len(vals)
                se = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1) / len(vals)) if len(vals) > 1 else 0
                law = LAW_RATES[claim](rate) if claim in LAW_RATES else None
                truth[claim] = mean if law is None else law
                truths.append({"rate": rate, "claim": claim, "truth": truth[claim], "long_runs": vals, "se": se})
                runs = ", ".join(f"{v:.6g}" for v in vals)
                print(f"truth at {rate:g}/s: {claim} = {truth[claim]:.6g}; long runs {runs}", file=sys.stderr)
            for design, rescale in (("rescaled", True), ("poisson", False)):
                if design not in args.designs:
                    continue
                tasks = [(rate, args.requests, args.seed * 100_000 + k, rescale) for k in range(args.runs)]
                outcomes = pool.map(sim_run, tasks, chunksize=4)
                for figure, claim in figures:
                    row = summarize(figure, claim, design, rate, truth[claim], outcomes, claim in WHOLE_RUN_RATES)
                    rows.append(row)
                    print("| " + " | ".join(row.cells()) + " |", flush=True)
    return rows, truths


# --- part 2: laws whose truth is known -------------------------------------------------------------------

Draw = Callable[[random.Random, int], list[float]]  # (rng, n) -> a sample of n values, in time order


@dataclass(frozen=True)
class Case:
    figure: str
    law: str
    n: int
    truth: float
    draw: Draw
    interval: Callable[[list[float]], Interval | None]
    exact: float | None = None  # the exact coverage, where it has a closed form


def lognormal(mu: float, sigma: float) -> Draw:
    return lambda rng, n: [rng.lognormvariate(mu, sigma) for _ in range(n)]


def ar1_latent(phi: float) -> Callable[[random.Random, int], list[float]]:
    """z_t = phi z_(t-1) + sqrt(1 - phi^2) e_t, e_t ~ N(0, 1), started stationary: every z_t is N(0, 1)."""
    scale = math.sqrt(1.0 - phi * phi)

    def draw(rng: random.Random, n: int) -> list[float]:
        z, out = rng.gauss(0.0, 1.0), []
        for _ in range(n):
            out.append(z)
            z = phi * z + scale * rng.gauss(0.0, 1.0)
        return out

    return draw


def independent_cases() -> list[Case]:
    mu, sigma = math.log(0.2), 0.5
    law = "lognormal(ln 0.2, 0.5), independent"

    def q_of(q: float) -> float:
        return math.exp(mu + sigma * Z.inv_cdf(q))

    def pct(figure: str, n: int, q: float) -> Case:
        ranks = order_statistic_ranks(n, q, CONFIDENCE)
        exact = None if ranks is None else ranks.coverage
        return Case(figure, law, n, q_of(q), lognormal(mu, sigma), lambda xs: percentile_interval(xs, q), exact)

    def share(figure: str, n: int, p: float, kind: Callable[[int, int, float], Interval]) -> Case:
        def draw(rng: random.Random, n: int) -> list[float]:
            return [1.0 if rng.random() < p else 0.0 for _ in range(n)]

        def holds(k: int) -> bool:
            iv = kind(k, n, CONFIDENCE)
            return iv.low <= p <= iv.high

        exact = sum(binomial_cdf(k, n, p) - binomial_cdf(k - 1, n, p) for k in range(n + 1) if holds(k))
        return Case(
            figure, f"Bernoulli({p}), independent", n, p, draw, lambda xs: kind(int(sum(xs)), n, CONFIDENCE), exact
        )

    cp = "attainment, Clopper-Pearson (not used by claims)"
    return [
        pct("TTFT p50", 100, 0.5),
        pct("TTFT p50", 1000, 0.5),
        pct("TTFT p99", 400, 0.99),
        pct("TTFT p99", 1000, 0.99),
        share("attainment, Wilson", 200, 0.9, wilson_interval),
        share(cp, 200, 0.9, clopper_pearson_interval),
        share("attainment, Wilson", 50, 0.97, wilson_interval),
        share(cp, 50, 0.97, clopper_pearson_interval),
    ]


def correlated_cases(phi: float, n: int) -> list[Case]:
    """The claims' methods on an AR(1) latent series: latencies exp(mu + sigma z_t), outcomes z_t <= c."""
    mu, sigma = math.log(0.2), 0.5
    latent = ar1_latent(phi)
    law = f"lognormal(ln 0.2, 0.5) of an AR(1), phi {phi}"

    def values(rng: random.Random, k: int) -> list[float]:
        return [math.exp(mu + sigma * z) for z in latent(rng, k)]

    def pct(figure: str, q: float) -> Case:
        def interval(xs: list[float]) -> Interval | None:
            return correlated_percentile_interval(xs, sorted(xs), q, CONFIDENCE)

        return Case(figure, law, n, math.exp(mu + sigma * Z.inv_cdf(q)), values, interval)

    c = Z.inv_cdf(0.9)

    def outcomes(rng: random.Random, k: int) -> list[float]:
        return [1.0 if z <= c else 0.0 for z in latent(rng, k)]

    def share(xs: list[float]) -> Interval | None:
        return correlated_share_interval([x > 0.5 for x in xs], CONFIDENCE)

    def mean(xs: list[float]) -> Interval | None:
        return batch_means_interval(xs, CONFIDENCE)

    return [
        pct("TTFT p50", 0.5),
        pct("TTFT p99", 0.99),
        pct("E2E p90", 0.9),
        Case(
            "attainment, Wilson on the effective count", f"z <= z(0.9) of an AR(1), phi {phi}", n, 0.9, outcomes, share
        ),
        Case("ITL mean, batch means", law, n, math.exp(mu + sigma * sigma / 2), values, mean),
    ]


def run_case(case: Case, runs: int, seed: int) -> tuple[int, int, float, str]:
    """Runs with an interval, how many contain the truth, their mean relative half-width, the method's kind."""
    rng = random.Random(f"{seed}:{case.figure}:{case.law}:{case.n}")
    got = covered = 0
    widths = 0.0
    method = ""
    for _ in range(runs):
        interval = case.interval(case.draw(rng, case.n))
        if interval is None:
            continue
        got += 1
        covered += interval.low <= case.truth <= interval.high
        widths += (interval.high - interval.low) / 2.0 / case.truth
        method = method or method_kind(interval.method)
    return got, covered, widths / max(1, got), method


def laws_part(args: argparse.Namespace) -> list[dict[str, object]]:
    out = []
    for case in independent_cases() + correlated_cases(0.8, 2000):
        got, covered, half, method = run_case(case, args.runs, args.seed)
        around = clopper_pearson_interval(covered, got) if got else None
        share = covered / got if got else math.nan
        exact = "" if case.exact is None else f"{case.exact:.2%}"
        band = "" if around is None else f" ({around.low:.1%}-{around.high:.1%})"
        none = f" ({args.runs - got} none)" if got < args.runs else ""
        print(
            f"| {case.figure} | {case.law} | {case.n:,} | {method} | {covered}/{got}{none} | {share:.1%}{band} | "
            f"{exact} | {half:.1%} |",
            flush=True,
        )
        out.append({"figure": case.figure, "law": case.law, "n": case.n, "runs": got, "covered": covered})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--part", choices=("sim", "laws", "all"), default="all")
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--rates", type=lambda s: [float(x) for x in s.split(",")], default=[8.0, 10.0])
    ap.add_argument("--designs", type=lambda s: s.split(","), default=["rescaled", "poisson"])
    ap.add_argument(
        "--figures", type=lambda s: s.split(","), default=[], help="only the claims whose names hold one of these"
    )
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--truth-runs", type=int, default=4)
    ap.add_argument("--truth-requests", type=int, default=50_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="also write every row and truth here")
    args = ap.parse_args()
    started = time.monotonic()
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    print(f"machine: {machine}", file=sys.stderr)
    record: dict[str, object] = {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine}
    if args.part in ("sim", "all"):
        print("| figure | design | rate | method | covered | share (its 95% interval) | mean half-width | bias | sd |")
        print("|---|---|---|---|---|---|---|---|---|")
        rows, truths = sim_part(args)
        record["sim"] = [row.__dict__ for row in rows]
        record["truths"] = truths
        print(f"sim part: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if args.part in ("laws", "all"):
        print("\n| figure | law | n | method | covered | share (its 95% interval) | exact coverage | mean half-width |")
        print("|---|---|---|---|---|---|---|---|")
        record["laws"] = laws_part(args)
    elapsed = time.monotonic() - started
    record["seconds"] = round(elapsed, 1)
    print(
        f"\n{args.runs} runs a row, seed {args.seed}, {elapsed:.0f} s, load {os.getloadavg()[0]:.1f}", file=sys.stderr
    )
    if args.json is not None:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
