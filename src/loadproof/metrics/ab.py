"""A/B claims of a randomized interleaved run (scenarios/ab.py), as pure functions of the stored run.

The run sends one fixed batch of prompts once per arm in every round, the two arms in a seeded random
order within each round. Records carry the arm in `family` ("a" or "b") and the round in `repeat`;
the manifest's plan holds the order, each arm's settings, the bootstrap seed and the resample count.

For each metric m (`decode_tokens_per_s`: (output_tokens - 1) / (t_last_token - t_first_token);
`ttft_s`: t_first_token - t_send; `output_tokens`: usage.completion_tokens), over successful requests:
- per round and arm: the median of m over the arm's requests of that round;
- `ab.m.a`, `ab.m.b`: the mean over rounds of those per-round figures (rounds where both arms have one);
- `ab.m.change`: (b - a) / a, arm a being the baseline;
- `ab.m.ci_low`, `ab.m.ci_high`: percentile bootstrap 95% interval of the change, resampling rounds
  with replacement and keeping each round's pair together (the round is the block the order was
  randomized in), `resamples` draws from `random.Random(seed)`: recomputable offline;
- `ab.m.significant`: the interval excludes 0.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence

from loadproof.metrics.claims import Claim, Direction, count, fact, number
from loadproof.metrics.distribution import quantile
from loadproof.metrics.figures import TTFT_CDF, LinePlot, Panel, Series, headline
from loadproof.metrics.latency import span_s
from loadproof.metrics.latency_figures import cdf_points
from loadproof.metrics.slo import slo_claims
from loadproof.metrics.spec_decode import SpecWindow, spec_window
from loadproof.metrics.throughput import decode_rate_per_s
from loadproof.plans.ab import ARMS, DEFAULT_RESAMPLES, AbPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S

LEVEL = 0.95


def ttft_s(record: RequestRecord) -> float | None:
    return record.ttft_ns / NS_PER_S if record.ok and record.ttft_ns is not None else None


def output_tokens(record: RequestRecord) -> float | None:
    return float(record.output_tokens) if record.ok and record.output_tokens is not None else None


# metric name -> (per-request function, unit, decimals); output length is there because a sampling
# setting can change what is generated, not only how fast: read a rate change beside it
METRICS: dict[str, tuple[Callable[[RequestRecord], float | None], str, int]] = {
    "decode_tokens_per_s": (decode_rate_per_s, "tokens/s", 1),
    "ttft_s": (ttft_s, "s", 3),
    "output_tokens": (output_tokens, "tokens", 1),
}
BETTER: dict[str, Direction] = {"decode_tokens_per_s": "higher", "ttft_s": "lower", "output_tokens": "neither"}


def relative_change(base: float, cand: float) -> float | None:
    """(cand - base) / base; None when the base is 0."""
    return None if base == 0 else (cand - base) / base


def percentile_interval(stats: list[float], level: float = LEVEL) -> tuple[float, float]:
    """The central `level` interval of the bootstrap's statistics: their quantiles at each tail (numpy's
    default interpolation, metrics/distribution.py)."""
    ordered = sorted(stats)
    tail = (1 - level) / 2
    return quantile(ordered, tail), quantile(ordered, 1 - tail)


def paired_bootstrap_change(
    pairs: Sequence[tuple[float, float]], rng: random.Random, resamples: int = DEFAULT_RESAMPLES, level: float = LEVEL
) -> tuple[float, float] | None:
    """Percentile interval of (mean b - mean a) / mean a, resampling (a, b) pairs; None below 2 pairs."""
    if len(pairs) < 2:
        return None
    n = len(pairs)
    stats = []
    for _ in range(resamples):
        draw = [pairs[rng.randrange(n)] for _ in range(n)]
        change = relative_change(sum(p[0] for p in draw) / n, sum(p[1] for p in draw) / n)
        if change is not None:
            stats.append(change)
    return percentile_interval(stats, level) if stats else None


def round_figures(
    records: list[RequestRecord], metric: Callable[[RequestRecord], float | None]
) -> list[tuple[int, float, float]]:
    """(round, a, b) for every round where both arms have a figure: the median of the metric per arm."""
    values: dict[tuple[int, str], list[float]] = defaultdict(list)
    for rec in records:
        if rec.scenario == "ab" and rec.family in ARMS:
            value = metric(rec)
            if value is not None:
                values[(rec.repeat, rec.family)].append(value)
    rounds = sorted({r for r, _ in values})
    return [
        (r, statistics.median(values[(r, "a")]), statistics.median(values[(r, "b")]))
        for r in rounds
        if values.get((r, "a")) and values.get((r, "b"))
    ]


def aggregate_tokens_per_s(batch: list[RequestRecord], _samples: Sequence[EngineSample]) -> float | None:
    """The arm's batch in a round: its successful requests' output tokens / (last end - first send)."""
    ok = [r for r in batch if r.ok and r.output_tokens]
    if not ok:
        return None
    span = max(r.end_ns for r in ok) - min(r.send_ns for r in ok)
    return sum(r.output_tokens or 0 for r in ok) / (span / NS_PER_S) if span > 0 else None


def _drafts(batch: list[RequestRecord], samples: Sequence[EngineSample]) -> SpecWindow | None:
    return spec_window(samples, min(r.send_ns for r in batch), max(r.end_ns for r in batch)) if batch else None


def spec_acceptance_pct(batch: list[RequestRecord], samples: Sequence[EngineSample]) -> float | None:
    window = _drafts(batch, samples)
    return 100 * window.accepted / window.draft_tokens if window is not None and window.draft_tokens else None


def spec_mean_accepted_length(batch: list[RequestRecord], samples: Sequence[EngineSample]) -> float | None:
    window = _drafts(batch, samples)
    return 1 + window.accepted / window.drafts if window is not None else None


# figures of an arm's whole batch in a round (its requests together, and its engine's counters around the batch:
# the /metrics samples the run took of that arm's target, `source` = the arm): name -> (function, unit, decimals,
# better, what it is)
BATCH_METRICS: dict[
    str, tuple[Callable[[list[RequestRecord], Sequence[EngineSample]], float | None], str, int, Direction, str]
] = {
    "aggregate_tokens_per_s": (
        aggregate_tokens_per_s,
        "tokens/s",
        1,
        "higher",
        "the batch's output tokens / (its last end - its first send)",
    ),
    "spec_acceptance_pct": (
        spec_acceptance_pct,
        "%",
        2,
        "higher",
        "accepted / draft tokens x 100, the arm's engine counters' growth around its batch (metrics.spec_decode)",
    ),
    "spec_mean_accepted_length": (
        spec_mean_accepted_length,
        "tokens",
        3,
        "higher",
        "1 + accepted tokens / drafts, the arm's engine counters' growth around its batch",
    ),
}


def batch_figures(
    records: list[RequestRecord],
    samples: Sequence[EngineSample],
    metric: Callable[[list[RequestRecord], Sequence[EngineSample]], float | None],
) -> dict[str, dict[int, float]]:
    """arm -> round -> the metric of the arm's batch in that round (absent where it has none, e.g. no drafts)."""
    batches: dict[tuple[int, str], list[RequestRecord]] = defaultdict(list)
    for rec in records:
        if rec.scenario == "ab" and rec.family in ARMS and rec.send_ns:
            batches[(rec.repeat, rec.family)].append(rec)
    out: dict[str, dict[int, float]] = {arm: {} for arm in ARMS}
    for (round_index, arm), batch in sorted(batches.items()):
        value = metric(batch, [s for s in samples if s.source == arm])
        if value is not None:
            out[arm][round_index] = value
    return out


def ab_claims(plan: AbPlan, records: list[RequestRecord], samples: Sequence[EngineSample] = ()) -> list[Claim]:
    seed = plan.bootstrap_seed
    resamples = plan.resamples
    ab = [r for r in records if r.scenario == "ab" and r.family in ARMS]
    claims = [
        count(
            "ab.rounds",
            len(plan.order),
            "rounds",
            "rounds planned; each sends the batch once per arm",
            direction="neither",
        )
    ]
    for arm in ARMS:
        claims.append(
            count(
                f"ab.failed_requests.{arm}",
                sum(1 for r in ab if r.family == arm and not r.ok),
                "requests",
                f"records of arm {arm} with ok == false",
                direction="lower",
            )
        )
    for name, (metric, unit, decimals) in METRICS.items():
        rows = round_figures(ab, metric)
        per_round = f"median over the arm's requests in a round, mean over {len(rows)} rounds with both arms"
        claims += compared(name, rows, unit, decimals, BETTER[name], per_round, seed, resamples)
    for name, (batch_metric, unit, decimals, better, what) in BATCH_METRICS.items():
        by_arm = batch_figures(ab, samples, batch_metric)
        paired = sorted(set(by_arm["a"]) & set(by_arm["b"]))
        if paired:
            per_round = f"{what}; mean over {len(paired)} rounds with both arms"
            claims += compared(
                name,
                [(r, by_arm["a"][r], by_arm["b"][r]) for r in paired],
                unit,
                decimals,
                better,
                per_round,
                seed,
                resamples,
            )
            continue
        for arm in ARMS:  # one arm only (drafts on one side): its figure, nothing to compare it with
            if by_arm[arm]:
                claims.append(
                    number(
                        f"ab.{name}.{arm}",
                        statistics.fmean(by_arm[arm].values()),
                        unit,
                        f"{name} of arm {arm}: {what}; mean over its {len(by_arm[arm])} rounds (the "
                        "other arm has none)",
                        decimals,
                        direction=better,
                    )
                )
    return claims


def compared(
    name: str,
    rows: list[tuple[int, float, float]],
    unit: str,
    decimals: int,
    better: Direction,
    per_round: str,
    seed: int,
    resamples: int,
) -> list[Claim]:
    """`ab.<name>.a`, `.b`, `.change`, and the bootstrap interval of the change over the rounds' pairs."""
    if not rows:
        return []
    a = statistics.fmean(row[1] for row in rows)
    b = statistics.fmean(row[2] for row in rows)
    claims = [
        number(f"ab.{name}.a", a, unit, f"{name} of arm a: {per_round}", decimals, direction=better),
        number(f"ab.{name}.b", b, unit, f"{name} of arm b: {per_round}", decimals, direction=better),
    ]
    change = relative_change(a, b)
    if change is None:
        return claims
    claims.append(number(f"ab.{name}.change", change, "", "(b - a) / a", 4, direction="neither"))
    ci = paired_bootstrap_change([(row[1], row[2]) for row in rows], random.Random(seed), resamples)
    if ci is None:
        return claims
    how = (
        f"percentile bootstrap {LEVEL:.0%} interval of (b - a) / a, rounds resampled in pairs, "
        f"{resamples} draws, random.Random({seed})"
    )
    significant = ci[0] > 0 or ci[1] < 0
    claims += [
        number(f"ab.{name}.ci_low", ci[0], "", how, 4, direction="neither"),
        number(f"ab.{name}.ci_high", ci[1], "", how, 4, direction="neither"),
        fact(f"ab.{name}.significant", significant, "the interval [ci_low, ci_high] excludes 0"),
    ]
    return claims


def claims_of_run(run: Run, plan: AbPlan) -> list[Claim]:
    return ab_claims(plan, run.records, run.samples) + slo_claims(run.records, plan.slo, span_s(run.records), "ab")


# --- report panels (catalog entry `figures`) ---------------------------------------------------------


HEADLINE = (
    ("decode, arm a", "ab.decode_tokens_per_s.a"),
    ("decode, arm b", "ab.decode_tokens_per_s.b"),
    ("decode change, b vs a", "ab.decode_tokens_per_s.change"),
    ("change significant", "ab.decode_tokens_per_s.significant"),
    ("TTFT, arm a", "ab.ttft_s.a"),
    ("TTFT, arm b", "ab.ttft_s.b"),
    ("TTFT change, b vs a", "ab.ttft_s.change"),
    ("rounds", "ab.rounds"),
)


def figures(run: Run, plan: AbPlan, claims: list[Claim]) -> list[Panel]:
    """The headline; the two arms' distributions overlaid (decode rate and TTFT of every request, an empirical
    CDF a arm); per round, each arm's figure (the median over its requests in that round), one plot a metric
    (report.html)."""
    return headline(claims, HEADLINE, "a change is (b - a) / a; significant: its 95% interval excludes 0") + (
        overlaid(run.records) + per_round(run.records)
    )


def overlaid(records: list[RequestRecord]) -> list[Panel]:
    """Decode rate and TTFT of each arm's requests, as overlaid empirical CDFs."""
    out: list[Panel] = []
    for name, key, label in (
        ("decode_tokens_per_s", "decode-cdf-by-arm", "decode rate, tokens/s"),
        ("ttft_s", TTFT_CDF, "time to first token, s"),
    ):
        metric = METRICS[name][0]
        arms = [
            (arm, sorted(v for v in (metric(r) for r in records if r.family == arm) if v is not None)) for arm in "ab"
        ]
        series = [Series(f"arm {arm} (n={len(v)})", cdf_points(v)) for arm, v in arms if len(v) >= 1]
        if len(series) == 2:
            out.append(
                LinePlot(
                    title=f"{name} of every request, by arm",
                    key=key,
                    series=series,
                    x_label=label,
                    y_label="fraction at or below",
                    step=True,
                    x_from_zero=True,
                    half=True,
                    caption="Empirical CDF of each arm's requests, every round together: the arms' whole "
                    "distributions, one over the other (the claims compare the rounds' medians).",
                )
            )
    return out


def per_round(records: list[RequestRecord]) -> list[Panel]:
    """Per round, each arm's median of each metric."""
    out: list[Panel] = []
    for name, (metric, unit, _) in METRICS.items():
        rows = round_figures(records, metric)
        if rows:
            out.append(
                LinePlot(
                    title=f"{name} per round, by arm",
                    key=f"{name.replace('_', '-')}-per-round",
                    half=True,
                    x_label="round",
                    x_whole=True,
                    y_label=unit,
                    y_from_zero=True,
                    dots=True,
                    series=[
                        Series("a", [(float(r), a) for r, a, _ in rows]),
                        Series("b", [(float(r), b) for r, _, b in rows]),
                    ],
                    caption=f"Each point: the median {name} over the arm's requests in that round. The arms ran in a "
                    "seeded random order within each round (order in the manifest).",
                )
            )
    return out
