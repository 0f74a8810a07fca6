"""Two synthetic fleet runs, every figure worked out by hand (tests/unit/metrics/test_fleet.py states them):

- `replay_rows` / `replay_run`: a replay of 8 requests through 2 replicas under round_robin, one request at a time
  (each alone in the fleet), sessions A A B B A A B B of 4 blocks each; the replicas' counters and the router's;
- `outage_rows` / `outage_run`: a load run of 20 requests, one a second, through 2 replicas; replica 1 stops
  answering at 8 s and comes back at 13 s with its counters reset (its engine restarted); the router keeps sending
  it requests until 9 s, marks it unhealthy at 10 s, opens its circuit breaker at 11 s and sends it requests again from 14 s; two requests fail.
"""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.plans.replay import ReplayPlan
from loadproof.records import RequestRecord
from loadproof.store.run_dir import Run
from tests import rundir_values as rv
from tests.unit.metrics import test_load

S = 1_000_000_000
T0 = 100 * S
W0, W1 = "http://127.0.0.1:18901", "http://127.0.0.1:18902"


def fleet_info(policy: str | None = "round_robin") -> dict[str, Any]:
    replica = {"block_tokens": 16, "num_blocks": 1000}
    return {
        "replicas": [{"url": W0 + "/metrics", **replica}, {"url": W1 + "/metrics", **replica}],
        "router_metrics": "http://127.0.0.1:29000/metrics",
        "policy": policy,
    }


def row(t: float, source: str, values: dict[str, float], up: bool = True) -> dict[str, Any]:
    return {"t_ns": T0 + round(t * S), "source": source, "values": {**values, "up": 1.0} if up else {"up": 0.0}}


def record(i: int, scenario: str, *, ok: bool = True, error: str | None = None) -> RequestRecord:
    """Request i: sent at i s, first token at i + 0.1 s, ended at i + 0.5 s; 64 prompt tokens, 4 output."""
    send = T0 + i * S
    return RequestRecord(
        request_id=f"{scenario}-{i}",
        endpoint="completions",
        scenario=scenario,
        family="synthetic",
        batch=i,
        ok=ok,
        error_kind=error,
        send_ns=send,
        intended_send_ns=send,
        dispatch_ns=send,
        first_token_ns=send + S // 10 if ok else None,
        last_token_ns=send + 4 * S // 10 if ok else None,
        end_ns=send + S // 2,
        prompt_tokens=64 if ok else None,
        output_tokens=4 if ok else None,
        planned_input_tokens=64,
        planned_output_tokens=4,
    )


# --- the replay through round robin ---------------------------------------------------------------------------
SESSIONS = "AABBAABB"
BLOCKS = {"A": [1, 2, 3, 4], "B": [5, 6, 7, 8]}


def replay_plan(**changes: Any) -> ReplayPlan:
    base = ReplayPlan(
        trace="data/t.jsonl",
        format="mooncake",
        sha256="cd" * 32,
        trace_rows=8,
        planned_requests=8,
        schedule_span_s=7.0,
        block_tokens=16,
        overhead_tokens=1,
        text_tokens=[63] * 8,
        hash_ids=[BLOCKS[s] for s in SESSIONS],
    )
    return msgspec.structs.replace(base, **changes)


def replay_rows(router_before: int = 0, first: int | None = None) -> list[dict[str, Any]]:
    """The replicas measured 96 hits of 256 queried (replica 0) and 80 of 256 (replica 1), 4 requests each; the
    router had sent `router_before` requests (to replica 0) before the run; with `first`, a router row 1 s in
    shows the run's first request on that replica alone."""
    rows = []
    if first is not None:
        rows.append(
            row(
                1,
                "router",
                {f"router_processed_requests_replica-{i}": router_before * (i == 0) + (i == first) for i in range(2)},
            )
        )
    for t, grown in ((-1, 0.0), (8, 1.0)):
        rows.append(
            row(
                t,
                "replica-0",
                {
                    "request_success_total": 10 + 4 * grown,
                    "prefix_cache_hits_total": 96 * grown,
                    "prefix_cache_queries_total": 256 * grown,
                },
            )
        )
        rows.append(
            row(
                t,
                "replica-1",
                {
                    "request_success_total": 20 + 4 * grown,
                    "prefix_cache_hits_total": 80 * grown,
                    "prefix_cache_queries_total": 256 * grown,
                },
            )
        )
        rows.append(
            row(
                t,
                "router",
                {
                    "router_processed_requests_replica-0": router_before + 4 * grown,
                    "router_processed_requests_replica-1": 4 * grown,
                    "router_policy_decisions_round_robin_replica-0": router_before + 4 * grown,
                    "router_policy_decisions_round_robin_replica-1": 4 * grown,
                    **({"router_prefix_missing_tokens": 8.0} if grown else {}),  # shown from its first count on
                },
            )
        )
    return rows


def replay_run(
    policy: str | None = "round_robin", router_before: int = 0, first: int | None = None, **plan: Any
) -> Run:
    manifest = {
        "scenario": "replay",
        "plan": msgspec.to_builtins(replay_plan(**plan)),
        "target": {"url": "http://127.0.0.1:18910", "fleet": fleet_info(policy)},
    }
    return rv.run_of(None, manifest, [record(i, "replay") for i in range(8)], samples=replay_rows(router_before, first))


# --- a replica lost ----------------------------------------------------------------------------------------------
FAILED = (8, 9)  # the requests that failed (sent at 8 s and 9 s)


def _replica0(t: int) -> dict[str, float]:
    steps = range(1, min(max(t, 0), 20) + 1)  # the steps (k-1 -> k) up to t; nothing grows after 20 s
    hits = sum(50 if k <= 8 else 20 if k <= 13 else 60 for k in steps)
    return {
        "request_success_total": 100.0 + len(steps),
        "prefix_cache_hits_total": 500.0 + hits,
        "prefix_cache_queries_total": 1000.0 + 100 * len(steps),
        "kv_cache_usage_perc": 0.2 + 0.01 * t,
        "num_requests_waiting": 1.0 if 8 <= t <= 12 else 0.0,
    }


def _replica1(t: int) -> dict[str, float]:
    if t <= 7:  # before: 80 hits a step
        k = max(t, 0)
        return {
            "request_success_total": 50.0 + k,
            "prefix_cache_hits_total": 80.0 * k,
            "prefix_cache_queries_total": 100.0 * k,
        }
    k = min(t, 20) - 12  # a new engine from 12 s: its counters from 0
    return {
        "request_success_total": float(k),
        "prefix_cache_hits_total": 10.0 + 30 * (k - 1),
        "prefix_cache_queries_total": 100.0 * k,
    }


def _router(t: int) -> dict[str, float]:
    """As vllm-router shows them: a counter from its first count on (its failures from 9 s, its retries from 10 s)."""
    sent1 = min(t, 9) if t <= 13 else 9 + (t - 13)
    values = {
        "router_processed_requests_replica-0": float(max(t, 0)),
        "router_processed_requests_replica-1": float(max(sent1, 0)),
        "router_worker_health_replica-0": 1.0,
        "router_worker_health_replica-1": 0.0 if 10 <= t <= 13 else 1.0,
        "router_cb_state_replica-1": 1.0 if 11 <= t <= 13 else 0.0,
    }
    if t >= 9:
        values["router_cb_failure_replica-1"] = 2.0 if t == 9 else 3.0
    if t >= 10:
        values["router_retries"] = 3.0
    return values


def outage_rows() -> list[dict[str, Any]]:
    rows = []
    for t in range(-1, 22):
        rows.append(row(t, "replica-0", _replica0(t)))
        rows.append(row(t, "replica-1", _replica1(t), up=not 8 <= t <= 12))
        rows.append(row(t, "router", _router(t)))
    return rows


def outage_records(scenario: str = "load") -> list[RequestRecord]:
    return [record(i, scenario, ok=i not in FAILED, error="ConnectError" if i in FAILED else None) for i in range(20)]


def outage_run() -> Run:
    manifest = {
        "scenario": "load",
        "plan": msgspec.to_builtins(test_load.plan(planned_requests=20)),
        "target": {"url": "http://127.0.0.1:18910", "fleet": fleet_info()},
    }
    return rv.run_of(None, manifest, outage_records(), samples=outage_rows())
