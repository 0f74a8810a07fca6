"""A fleet's claims (docs/fleet.md, "Measuring a fleet"): each replica's requests, prompt tokens, prefix hits, KV
use and queue, what the router sent it, and for the fleet its total, its prefix-hit rate and how even the load was;
with the recovery timeline where a replica went away (`metrics.fleet_timeline`) and the expected prefix hits under
the router's policy (`metrics.fleet_expectation`). Pure functions of a run's replica and router rows
(`Run.fleet_samples`, `metrics.fleet_rows`) and its records; a run without replica rows has none of them.
"""

from __future__ import annotations

import statistics
from typing import Any

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.fleet_expectation import expected_claims
from loadproof.metrics.fleet_rows import HITS, QUERIES, FleetRows, fleet_rows, growth, window
from loadproof.metrics.fleet_timeline import timeline_claims
from loadproof.rundir.fleet_keys import (
    CB_PREFIX,
    PREFIX_OUTCOME,
    PROCESSED,
    RETRIES,
    policies_in,
    replica_source,
    worker_key,
)

REPLICA = "fleet.<replica>"


def replica_claims(rows: FleetRows, i: int, start: int, end: int) -> list[Claim]:
    """Replica i's claims over the run's window."""
    parts = {"replica": replica_source(i)}
    answered = rows.answered(i)
    out: list[Claim] = []
    for key, name, what in (
        ("request_success_total", "requests", "requests it finished: growth of request_success_total"),
        ("prompt_tokens_total", "prompt_tokens", "prompt tokens it counted: growth of prompt_tokens_total"),
    ):
        grown = growth(answered, key, start)
        if grown is not None:
            out.append(
                count(
                    f"{REPLICA}.{name}",
                    int(round(grown)),
                    name.replace("_", " "),
                    f"{what} over the run (docs/fleet.md)",
                    direction="neither",
                    parts=parts,
                )
            )
    hits, queries = growth(answered, HITS, start), growth(answered, QUERIES, start)
    if hits is not None and queries:
        out.append(
            number(
                f"{REPLICA}.prefix_hit_pct",
                100 * hits / queries,
                "%",
                "its prefix_cache_hits_total growth / prefix_cache_queries_total growth over the run x 100",
                2,
                direction="higher",
                parts=parts,
            )
        )
    during = [s.values for s in answered if start <= s.t_ns <= end]
    for key, name, scale, unit, what in (
        ("kv_cache_usage_perc", "kv_usage", 100.0, "%", "kv_cache_usage_perc x 100"),
        ("num_requests_waiting", "waiting", 1.0, "requests", "num_requests_waiting"),
    ):
        seen = [v[key] * scale for v in during if key in v]
        if not seen:
            continue
        suffix = "_pct" if unit == "%" else ""
        for stat, value in (("max", max(seen)), ("mean", statistics.fmean(seen))):
            out.append(
                number(
                    f"{REPLICA}.{name}_{stat}{suffix}",
                    value,
                    unit,
                    f"the {stat} of its {what} over the rows it answered between the first send and the last end",
                    1,
                    direction="neither",
                    parts=parts,
                )
            )
    router = rows.router_answered
    for ours, name, what in (
        (PROCESSED, "router_requests", "requests the router sent it: growth of vllm_router_processed_requests_total"),
        (CB_PREFIX + "failure", "router_failures", "requests to it the router's circuit breaker counted as failed"),
    ):
        grown = growth(router, worker_key(ours, i), start, absent=0.0)
        if grown is not None:
            out.append(
                count(
                    f"{REPLICA}.{name}",
                    int(round(grown)),
                    "requests",
                    f"{what}, over the run",
                    direction="neither",
                    parts=parts,
                )
            )
    return out


def balance_claims(requests: list[int]) -> list[Claim]:
    """How evenly the replicas shared the run's finished requests (a figure list, no verdict)."""
    total, n = sum(requests), len(requests)
    if n < 1 or total <= 0:
        return []
    shares = ", ".join(f"{replica_source(i)} {100 * r / total:.1f}%" for i, r in enumerate(requests))
    return [
        number(
            "fleet.balance.max_share_over_even",
            max(requests) / total * n,
            "x",
            "the busiest replica's share of the finished requests / 1/N (1.00: even; N: one replica took them all)",
            2,
            direction="neither",
        ),
        number(
            "fleet.balance.cv",
            statistics.pstdev(requests) / statistics.fmean(requests),
            "",
            "coefficient of variation of the replicas' finished requests: population standard deviation / mean",
            3,
            direction="neither",
        ),
        fact(
            "fleet.balance.shares", shares, "each replica's share of the finished requests (fleet.<replica>.requests)"
        ),
    ]


def totals_claims(rows: FleetRows, replica: list[list[Claim]], start: int) -> list[Claim]:
    """The fleet's: its replicas, requests, prefix-hit rate, the balance, the router's retries and policy."""
    n = len(rows.replicas)
    out = [count("fleet.replicas", n, "replicas", "replicas whose /metrics the run scraped", direction="neither")]
    requests = [next((int(c.value) for c in claims if c.pattern == f"{REPLICA}.requests"), None) for claims in replica]
    known = [r for r in requests if r is not None]
    if known and len(known) == n:
        out.append(
            count("fleet.requests", sum(known), "requests", "sum of fleet.<replica>.requests", direction="neither")
        )
    grown = [(growth(rows.answered(i), HITS, start), growth(rows.answered(i), QUERIES, start)) for i in range(n)]
    if all(h is not None and q is not None for h, q in grown) and sum(q or 0.0 for _, q in grown) > 0:
        out.append(
            number(
                "fleet.prefix_hit_pct",
                100 * sum(h or 0.0 for h, _ in grown) / sum(q or 0.0 for _, q in grown),
                "%",
                "sum over replicas of prefix_cache_hits_total growth / sum of prefix_cache_queries_total growth x 100",
                2,
                direction="higher",
            )
        )
    if known and len(known) == n:
        out += balance_claims(known)
    router = rows.router_answered
    retries = growth(router, RETRIES, start, absent=0.0)
    if retries is not None:
        out.append(
            count(
                "fleet.router.retries",
                int(round(retries)),
                "retries",
                "growth of vllm_router_retries_total over the run",
                direction="lower",
            )
        )
    outcomes = sorted({k[len(PREFIX_OUTCOME) :] for s in router for k in s.values if k.startswith(PREFIX_OUTCOME)})
    for outcome in outcomes:
        decided = growth(router, PREFIX_OUTCOME + outcome, start, absent=0.0)
        if decided is not None:
            out.append(
                count(
                    "fleet.router.prefix_decisions.<outcome>",
                    int(round(decided)),
                    "requests",
                    "growth of vllm_router_prefix_routing_decisions_total of that outcome (prefix_hit, prefix_miss; "
                    "missing_tokens: the router could not render the prompt, so cache_aware saw no prefix)",
                    direction="neither",
                    parts={"outcome": outcome},
                )
            )
    policies = sorted({p for s in router for p in policies_in(s.values)})
    if policies:
        out.append(
            fact("fleet.router.policy", ", ".join(policies), "the policy label of vllm_router_policy_decisions_total")
        )
    return out


def fleet_claims(run: Any) -> list[Claim]:
    """Every fleet claim of a run (per replica, the fleet's, the recovery timeline, the expectation); none without
    replica rows or records."""
    rows = fleet_rows(run.fleet_samples, run.manifest)
    span = window(run.records)
    if rows is None or span is None:
        return []
    start, end = span
    replica = [replica_claims(rows, i, start, end) for i in range(len(rows.replicas))]
    claims = [c for claims in replica for c in claims] + totals_claims(rows, replica, start)
    return claims + timeline_claims(rows, run.records, start, end) + expected_claims(run, rows, claims)
