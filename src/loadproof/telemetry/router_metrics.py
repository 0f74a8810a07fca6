"""A router's own metrics, read from its Prometheus exposition (vllm-router's `--prometheus-port`, 29000 by default;
GET /metrics on the router's API port is forwarded to one worker and is never the router's).

vllm-router 0.1.17 labels its per-worker series by the worker's URL (`worker="http://127.0.0.1:18901"`). A URL is
no name a metrics.jsonl key may hold (it is a host, and publish removes hosts), so each series is stored under our
name + `_replica-<i>`, i the worker's place in the fleet's replica list (`worker_key`); a worker not in the list
is left out (a worker is its replica where both are served at one host and port: write the replica's metrics URL
with the host the router was given). The policy label of the decisions counter is kept in the name
(`router_policy_decisions_round_robin_replica-0`), so the run says which policy decided, in numbers alone.

| our name | vllm-router's | labels |
|---|---|---|
| `router_processed_requests_replica-<i>` | `vllm_router_processed_requests_total` | worker |
| `router_policy_decisions_<policy>_replica-<i>` | `vllm_router_policy_decisions_total` | policy, worker |
| `router_cb_<outcome>_replica-<i>` | `vllm_router_cb_outcomes_total` | worker, outcome (success, failure) |
| `router_worker_health_replica-<i>` | `vllm_router_worker_health` | worker (1 healthy, 0 not) |
| `router_cb_state_replica-<i>` | `vllm_router_cb_state` | worker (0 closed; open or half-open otherwise) |
| `router_active_workers` | `vllm_router_active_workers` | |
| `router_requests` | `vllm_router_requests_total` | summed over routes |
| `router_retries` | `vllm_router_retries_total` | summed over routes |
| `router_prefix_<outcome>` | `vllm_router_prefix_routing_decisions_total` | outcome (prefix_hit, prefix_miss, missing_tokens), summed over policy and stage |
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from loadproof.rundir.fleet_keys import (
    ACTIVE_WORKERS,
    CB_PREFIX,
    CB_STATE,
    DECISIONS_PREFIX,
    HEALTH,
    PREFIX_OUTCOME,
    PROCESSED,
    RETRIES,
    worker_key,
)

_WORD = re.compile(r"[a-z0-9_]{1,32}")  # a policy's or an outcome's name, as it may stand in a key
PER_WORKER = {
    "vllm_router_processed_requests_total": PROCESSED,
    "vllm_router_worker_health": HEALTH,
    "vllm_router_cb_state": CB_STATE,
}
TOTALS = {
    "vllm_router_active_workers": ACTIVE_WORKERS,
    "vllm_router_requests_total": "router_requests",
    "vllm_router_retries_total": RETRIES,
}


def origin(url: str) -> tuple[str, int | None] | None:
    """Where a URL is served (host, port: the scheme's default where none is written); None for no URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


def parse_router(text: str, replicas: Sequence[str]) -> dict[str, float]:
    """Our name -> value of every router series (the table above) in a Prometheus text exposition; `replicas` are
    the fleet's replicas' metrics URLs, in order, a worker matched to the replica served at its host and port.
    ValueError where the text is no exposition."""
    index: dict[tuple[str, int | None], int] = {}
    for i, url in enumerate(replicas):
        at = origin(url)
        if at is not None:
            index.setdefault(at, i)
    values: dict[str, float] = {}

    def add(key: str, value: float) -> None:
        values[key] = values.get(key, 0.0) + value

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            value = float(sample.value)
            if not math.isfinite(value):
                continue
            name, labels = sample.name, sample.labels
            if name in TOTALS:
                add(TOTALS[name], value)
                continue
            if name == "vllm_router_prefix_routing_decisions_total":
                outcome = labels.get("outcome", "")
                if _WORD.fullmatch(outcome):
                    add(PREFIX_OUTCOME + outcome, value)
                continue
            at = origin(labels.get("worker", ""))
            replica = index.get(at) if at is not None else None
            if replica is None:
                continue
            if name in PER_WORKER:
                add(worker_key(PER_WORKER[name], replica), value)
            elif name == "vllm_router_policy_decisions_total" and _WORD.fullmatch(labels.get("policy", "")):
                add(worker_key(DECISIONS_PREFIX + labels["policy"], replica), value)
            elif name == "vllm_router_cb_outcomes_total" and _WORD.fullmatch(labels.get("outcome", "")):
                add(worker_key(CB_PREFIX + labels["outcome"], replica), value)
    return values
