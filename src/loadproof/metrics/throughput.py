"""Throughput figures (docs/scenarios.md, 'throughput'), as pure functions of RequestRecords.

Only successful records count toward a rate; a batch with any failed request has no aggregate (its
load was not the load asked for) and is counted under `failed_batches` instead.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence

from loadproof.metrics.claims import Claim, count, number
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

DECODE_FORMULA = "median over requests of (output_tokens - 1) / (t_last_token - t_first_token)"
AGGREGATE_FORMULA = (
    "median over batches of sum(output_tokens) / (last completion - first send); "
    "all streams together, not any one user's rate"
)
TTFT_FORMULA = "median over requests of (t_first_token - t_send)"


def decode_rate_per_s(record: RequestRecord) -> float | None:
    """(output_tokens - 1) / (t_last_token - t_first_token) in tokens/s; None when undefined."""
    if not record.ok or record.output_tokens is None or record.output_tokens < 2:
        return None
    if record.first_token_ns is None or record.last_token_ns is None:
        return None
    span_ns = record.last_token_ns - record.first_token_ns
    if span_ns <= 0:
        return None
    return (record.output_tokens - 1) * NS_PER_S / span_ns


def batch_aggregate_per_s(batch: Sequence[RequestRecord]) -> float | None:
    """sum(output_tokens) / (last completion - first send) in tokens/s; None if any request failed."""
    if not batch or not all(r.ok and r.output_tokens is not None for r in batch):
        return None
    span_ns = max(r.end_ns for r in batch) - min(r.send_ns for r in batch)
    if span_ns <= 0:
        return None
    return sum(r.output_tokens or 0 for r in batch) * NS_PER_S / span_ns


def throughput_claims(records: Iterable[RequestRecord]) -> list[Claim]:
    """Claims `throughput.<family>.c<N>.*` for every family and concurrency level present."""
    groups: dict[tuple[str, int], list[RequestRecord]] = defaultdict(list)
    for record in records:
        if record.scenario == "throughput":
            groups[(record.family, record.concurrency)].append(record)
    claims: list[Claim] = []
    family_order = {family: i for i, (family, _) in reversed(list(enumerate(groups)))}
    for (family, conc), group in sorted(groups.items(), key=lambda kv: (family_order[kv[0][0]], kv[0][1])):
        level, parts = "throughput.<family>.c<N>", {"family": family, "N": conc}
        rates = [r for r in (decode_rate_per_s(rec) for rec in group) if r is not None]
        ttfts = [rec.ttft_ns / NS_PER_S for rec in group if rec.ok and rec.ttft_ns is not None]
        failed = sum(1 for rec in group if not rec.ok)
        if rates:
            # c1: one user's rate; cN: each stream's among N (documented apart)
            name, name_parts, formula = (("throughput.<family>.c1.decode_tokens_per_s", {"family": family},
                                          DECODE_FORMULA) if conc == 1 else
                                         (f"{level}.decode_tokens_per_s", parts,
                                          DECODE_FORMULA + f", each stream among {conc}"))
            claims.append(number(name, statistics.median(rates), "tokens/s", formula, direction="higher",
                                 parts=name_parts))
        if ttfts:
            claims.append(number(f"{level}.ttft_median_s", statistics.median(ttfts), "s", TTFT_FORMULA, 3,
                                 direction="lower", parts=parts))
        if conc > 1:
            batches: dict[tuple[int, int], list[RequestRecord]] = defaultdict(list)
            for rec in group:
                batches[(rec.repeat, rec.batch)].append(rec)
            aggregates = [batch_aggregate_per_s(b) for _, b in sorted(batches.items())]
            valid = [a for a in aggregates if a is not None]
            if valid:
                claims.append(number(f"{level}.aggregate_tokens_per_s", statistics.median(valid), "tokens/s",
                                     AGGREGATE_FORMULA, direction="higher", parts=parts))
            claims.append(count(f"{level}.failed_batches", len(aggregates) - len(valid), "batches",
                                "count of batches with a failed request", direction="lower", parts=parts))
        claims.append(count(f"{level}.failed_requests", failed, "requests", "count of records with ok == false",
                            direction="lower", parts=parts))
        out_tokens = [rec.output_tokens for rec in group if rec.ok and rec.output_tokens is not None]
        if out_tokens:
            claims.append(number(f"{level}.mean_output_tokens", statistics.fmean(out_tokens), "tokens",
                                 "mean of usage.completion_tokens over successful requests", direction="neither",
                                 parts=parts))
    return claims


def claims_of_run(run, plan) -> list[Claim]:
    """The claims are pure functions of the records (a run splits by `repeat` for compare); the plan
    (families, concurrency, settings) only says what was asked."""
    return throughput_claims(run.records)
