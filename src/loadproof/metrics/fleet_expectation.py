"""The prefix hits a fleet's replicas should see under the router's policy (docs/fleet.md, "The expectation per
replica"), beside what their counters say.

The run's prefilled requests, as the scenario gives them (its catalog entry's `fleet_requests`: each one's KV blocks,
the session header's value the router reads, when it was sent and ended), go through the model of the policy
(`routing.assign`: in send order, each replica's load its requests sent and not yet ended), and each replica's
share through the LRU model of its own cache (`metrics.prefix_cache.simulate`, at the block count its /metrics
gave when the run began), as one engine's expectation is built. The policy is `--router-policy`, else the one
the router's decision counter names.

Where the model can say which replica a request went to (round_robin, cache_aware, kv_aware), each replica's
expectation stands beside its counters; round_robin's turn starts where the router's first requests of the run
went (`_router_position`). Where it cannot (random and power_of_two draw at random;
consistent_hash hashes with another function than vllm-router's; sticky_least_loaded breaks ties by such a hash),
the model groups the requests as the policy does but places the groups at random: only the fleet's totals are
compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadproof.catalog import column
from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.fleet_rows import FleetRows
from loadproof.metrics.prefix_cache import PrefixRequest, simulate
from loadproof.plans import load_plan, scenario_of
from loadproof.registry import Registry
from loadproof.routing import MODELLED_POLICIES, Routed, assign
from loadproof.rundir.fleet_keys import PROCESSED, policies_in, replica_source, worker_key

PLACED = ("round_robin", "cache_aware", "kv_aware")  # policies whose model says which replica, not only which group


@dataclass(frozen=True)
class FleetRequest:
    """One prefilled request of a fleet run: as a replica's cache sees it (`cache`: its blocks' keys, when the
    engine took it up and when it ended, its tokens), when it reached the router (`sent_ns`), and the value of the
    session header the router reads (None: it carried none the router reads)."""

    cache: PrefixRequest
    sent_ns: int
    session: str | None = None


fleet_request_functions: Registry[Any] = Registry.over("scenario", column("fleet_requests"))


def policy_of(run: Any, rows: FleetRows) -> tuple[str | None, str]:
    """The router's policy and where it was read: --router-policy, else the one its decisions counter names."""
    fleet = run.manifest.target.fleet
    if fleet is not None and fleet.policy:
        return fleet.policy, "--router-policy"
    named = sorted({p for s in rows.router_answered for p in policies_in(s.values)})
    if len(named) == 1:
        return named[0], "the router's vllm_router_policy_decisions_total"
    return None, "no --router-policy, and the router's rows name " + ("several" if named else "none")


def expected_claims(run: Any, rows: FleetRows, measured: list[Claim]) -> list[Claim]:
    """The fleet's and, where the policy places requests, each replica's expected prefix-hit rate, with the
    difference from the engines' counters (`measured`: the fleet's claims so far)."""
    scenario = scenario_of(run)
    if scenario not in fleet_request_functions:
        return []
    policy, source = policy_of(run, rows)
    fleet = run.manifest.target.fleet
    caches = [(r.block_tokens, r.num_blocks) for r in fleet.replicas] if fleet is not None else []
    why = (
        source
        if policy is None
        else f"no model of policy {policy}"
        if policy not in MODELLED_POLICIES
        else "a replica's /metrics gave no KV cache size (cache_config_info)"
        if len(caches) != len(rows.replicas) or any(b is None or n is None for b, n in caches)
        else "the replicas' KV blocks differ in size"
        if len({b for b, _ in caches}) != 1
        else None
    )
    if why is not None or policy is None:
        return [fact("fleet.expected.skipped", why or source, "why the fleet has no expected prefix hits")]
    block_tokens = int(caches[0][0] or 0)
    requests: list[FleetRequest] = fleet_request_functions.get(scenario)(run, load_plan(run), block_tokens)
    if not requests:
        return []
    n = len(rows.replicas)
    routed = [Routed(tuple(q.cache.keys), q.session, q.sent_ns, max(q.sent_ns, q.cache.end_ns)) for q in requests]
    chosen = assign(policy, routed, n)
    if policy == "round_robin":
        turned = _router_position(rows, min(q.sent_ns for q in requests))
        chosen = [(c + turned) % n for c in chosen]
    hits = [0] * n
    asked = [0] * n
    sent = [0] * n
    for i in range(n):
        mine = [q.cache for q, c in zip(requests, chosen) if c == i]
        hits[i] = sum(simulate(mine, caches[i][1], block_tokens).hits)
        asked[i] = sum(r.prompt_tokens for r in mine)
        sent[i] = len(mine)
    return _claims(policy, source, hits, asked, sent, {c.name: c for c in measured})


def _router_position(rows: FleetRows, before_ns: int) -> int:
    """Where the router's round robin stood when the run began: read from its per-replica counters, the replica
    its first requests of the run went to (the first rows between which its counters rose: the replicas that got
    one request more than the others are consecutive, from the one the turn began at); where that rise says
    nothing (as many requests to each), its requests sent before the run, mod N; 0 without a router row then.
    The counters alone do not say it: vllm-router turns its round robin on requests it does not count as
    processed (a target's GET /v1/models is one)."""
    n = len(rows.replicas)
    answered = rows.router_answered
    earlier = [s for s in answered if s.t_ns <= before_ns]
    count = [earlier[-1].values.get(worker_key(PROCESSED, i), 0.0) for i in range(n)] if earlier else [0.0] * n
    later = [s for s in answered if s.t_ns > before_ns]
    for row in later:
        now = [row.values.get(worker_key(PROCESSED, i), 0.0) for i in range(n)]
        rise = [max(0, int(round(b - a))) for a, b in zip(count, now)]
        if sum(rise) == 0:
            count = now
            continue
        low = min(rise)
        more = [i for i in range(n) if rise[i] > low]
        starts = [i for i in more if (i - 1) % n not in more]
        if len(starts) == 1 and len(more) < n:
            return starts[0]
        break
    return int(round(sum(count))) % n if earlier else 0


def _claims(
    policy: str, source: str, hits: list[int], asked: list[int], sent: list[int], measured: dict[str, Claim]
) -> list[Claim]:
    placed = policy in PLACED
    out = [
        fact(
            "fleet.expected.policy",
            f"{policy} ({source}); " + ("each replica compared" if placed else "the fleet's totals compared only"),
            "the policy the expectation models, where it was read, and whether its model places requests on "
            "replicas (round_robin, cache_aware, kv_aware) or only groups them",
        )
    ]
    if sum(asked):
        fleet = 100 * sum(hits) / sum(asked)
        out.append(
            number(
                "fleet.prefix_hit_pct.expected",
                fleet,
                "%",
                "sum over the replicas of the hits an LRU cache of each one's size gives the requests the policy's "
                "model sends it / sum of their prompt tokens x 100",
                2,
                direction="neither",
            )
        )
        out += _difference("fleet.prefix_hit_pct", fleet, measured, {})
    if not placed:
        return out
    for i, (h, a, k) in enumerate(zip(hits, asked, sent)):
        parts = {"replica": replica_source(i)}
        out.append(
            count(
                "fleet.<replica>.requests.expected",
                k,
                "requests",
                "the prefilled requests the policy's model sends it",
                direction="neither",
                parts=parts,
            )
        )
        if a:
            value = 100 * h / a
            out.append(
                number(
                    "fleet.<replica>.prefix_hit_pct.expected",
                    value,
                    "%",
                    "the hits an LRU cache of its size gives the requests the policy's model sends it / their "
                    "prompt tokens x 100",
                    2,
                    direction="neither",
                    parts=parts,
                )
            )
            out += _difference("fleet.<replica>.prefix_hit_pct", value, measured, parts)
    return out


def _difference(pattern: str, expected: float, measured: dict[str, Claim], parts: Mapping[str, object]) -> list[Claim]:
    """The engines' rate minus the expectation, where the engines gave one."""
    name = pattern.replace("<replica>", str(parts.get("replica", "")))
    engine = measured.get(name)
    if engine is None or not isinstance(engine.value, (int, float)):
        return []
    return [
        number(
            f"{pattern}.measured_minus_expected_pp",
            float(engine.value) - expected,
            "pp",
            "the engines' counters' rate - the expected rate",
            2,
            direction="neither",
            parts=parts,
        )
    ]
