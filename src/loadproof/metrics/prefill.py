"""Cold prefill latency: median TTFT over R cold repeats of one long input (docs/scenarios.md, 'prefill')."""

from __future__ import annotations

import statistics

from loadproof.metrics.claims import Claim, Criterion, acceptance_claims, count, number
from loadproof.metrics.figures import BarPlot, Bars, Panel, headline
from loadproof.metrics.throughput import decode_rate_per_s
from loadproof.metrics.uncertainty import stat_interval
from loadproof.plans.prefill import PrefillPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import Run
from loadproof.units import NS_PER_S


def counter_delta(samples: list[EngineSample], key: str, start_ns: int, end_ns: int) -> float | None:
    """Growth of a counter between the last sample at or before `start_ns` and the first at or after `end_ns`."""
    before = [s for s in samples if s.t_ns <= start_ns and key in s.values]
    after = [s for s in samples if s.t_ns >= end_ns and key in s.values]
    if not before or not after:
        return None
    return after[0].values[key] - before[-1].values[key]


def prefill_claims(plan: PrefillPlan, records: list[RequestRecord], samples: list[EngineSample]) -> list[Claim]:
    samples = sorted(samples, key=lambda s: s.t_ns)
    by_id = {r.request_id: r for r in records}
    recs = [by_id.get(rep.request_id) for rep in plan.repeats]
    planned = plan.input_tokens
    claims = [count("prefill.input_tokens", planned, "tokens", "planned input tokens (L)", direction="neither")]
    ttfts: list[float] = []
    hits_total = 0.0
    criteria: list[Criterion] = []
    wrong_tokens, warm, failed = [], [], []
    for i, rec in enumerate(recs):
        if rec is None or not rec.ok or rec.ttft_ns is None:
            failed.append(f"r{i}: {rec.error_kind if rec else 'missing'}")
            continue
        ttft = rec.ttft_ns / NS_PER_S
        ttfts.append(ttft)
        claims.append(
            number(
                "prefill.r<i>.ttft_s",
                ttft,
                "s",
                "t_first_token - t_send of repeat i",
                2,
                direction="lower",
                parts={"i": i},
            )
        )
        if rec.prompt_tokens != planned:
            wrong_tokens.append(f"r{i} had {rec.prompt_tokens}")
        hits = counter_delta(samples, "prefix_cache_hits_total", rec.send_ns, rec.end_ns)
        if hits is None or hits != 0:
            warm.append(f"r{i}: {hits if hits is not None else 'no counter'}")
        hits_total += hits or 0.0
    if ttfts:
        claims.append(
            number(
                "prefill.cold_ttft_median_s",
                statistics.median(ttfts),
                "s",
                "median over R cold repeats of t_first_token - t_send",
                2,
                direction="lower",
                interval=stat_interval(ttfts, "p50"),
            )
        )
    rates = [r for r in (decode_rate_per_s(rec) for rec in recs if rec) if r is not None]
    if rates:
        claims.append(
            number(
                "prefill.decode_tokens_per_s",
                statistics.median(rates),
                "tokens/s",
                "median over repeats of (output_tokens - 1) / (t_last_token - t_first_token), at L tokens of context",
                direction="higher",
                interval=stat_interval(rates, "p50"),
            )
        )
    claims.append(
        count(
            "prefill.prefix_cache_hits",
            int(hits_total),
            "tokens",
            "sum over repeats of prefix_cache_hits_total growth across the repeat",
            direction="lower",
        )
    )
    criteria.append(
        Criterion(
            "completed",
            "FAIL" if failed else "PASS",
            f"{len(ttfts)}/{len(recs)} repeats completed" + (f"; {', '.join(failed)}" if failed else ""),
        )
    )
    criteria.append(
        Criterion(
            "prompt_tokens",
            "FAIL" if wrong_tokens else "PASS",
            f"usage.prompt_tokens == {planned} for {len(ttfts) - len(wrong_tokens)}/{len(ttfts)} repeats"
            + (f"; {', '.join(wrong_tokens)}" if wrong_tokens else ""),
        )
    )
    criteria.append(
        Criterion(
            "cold_prefix_cache",
            "FAIL" if warm else "PASS",
            "0 prefix-cache hits in every repeat" if not warm else f"hits: {', '.join(warm)}",
        )
    )
    return claims + acceptance_claims("prefill", criteria)


def claims_of_run(run: Run, plan: PrefillPlan) -> list[Claim]:
    return prefill_claims(plan, run.records, run.samples)


# --- report panels (catalog entry `figures`) ---------------------------------------------------------

HEADLINE = (
    ("cold TTFT, median", "prefill.cold_ttft_median_s"),
    ("input tokens", "prefill.input_tokens"),
    ("decode after the prefill", "prefill.decode_tokens_per_s"),
    ("prefix-cache hits", "prefill.prefix_cache_hits"),
)


def figures(run: Run, plan: PrefillPlan, claims: list[Claim]) -> list[Panel]:
    """The headline, and each cold repeat's TTFT as a bar, the median beside them (report.html)."""
    by_name = {c.name: c for c in claims}
    repeats = [(f"r{i}", by_name.get(f"prefill.r{i}.ttft_s")) for i in range(len(plan.repeats))]
    shown = [(name, float(c.value)) for name, c in repeats if c is not None]
    median = by_name.get("prefill.cold_ttft_median_s")
    if median is not None:
        shown.append(("median", float(median.value)))
    bars: list[Panel] = (
        [
            BarPlot(
                title=f"Cold TTFT of each repeat, {plan.input_tokens:,} input tokens",
                key="ttft-per-repeat",
                groups=[name for name, _ in shown],
                series=[Bars("time to first token, s", [value for _, value in shown])],
                y_label="seconds",
                x_label="repeat",
                half=True,
                caption="Each repeat's t_first_token - t_send (prefill.r<i>.ttft_s), a prompt no earlier request "
                "shares a prefix with, and their median (prefill.cold_ttft_median_s).",
            )
        ]
        if shown
        else []
    )
    return headline(claims, HEADLINE) + bars
