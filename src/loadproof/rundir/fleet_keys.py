"""How a fleet's rows of metrics.jsonl are named (docs/fleet.md, "Measuring a fleet"): the writer
(`telemetry.fleet_scraper`) and the readers (`store.load_run`, `metrics.fleet`) share these names.

- `source`: `replica-<i>` for replica i's own /metrics (i in the order of the manifest's `target.fleet.replicas`),
  `router` for the router's, and `engine` for the fleet's row, built from the replicas' of one tick: the row
  every single-engine claim reads.
- `up` in a replica's or the router's row: 1 where its /metrics answered at that tick, 0 where it did not (and
  the row holds nothing else), as Prometheus records a scrape.
- a router row's per-worker values are named ours + `_replica-<i>` (`router_processed_requests_replica-0`):
  a worker's URL is mapped to its place in the replica list, never stored.

Standard library only.
"""

from __future__ import annotations

ROUTER_SOURCE = "router"
FLEET_SOURCE = "engine"
REPLICA_PREFIX = "replica-"
UP = "up"

# a router row's values (telemetry.router_metrics maps vllm-router's series onto them)
PROCESSED = "router_processed_requests"  # per worker: requests the router sent it (counter)
HEALTH = "router_worker_health"  # per worker: 1 healthy, 0 not
CB_STATE = "router_cb_state"  # per worker: its circuit breaker, 0 closed
CB_PREFIX = "router_cb_"  # + outcome (success, failure), per worker (counter)
DECISIONS_PREFIX = "router_policy_decisions_"  # + policy, per worker (counter)
RETRIES = "router_retries"  # the router's retries, every route (counter)
PREFIX_OUTCOME = (
    "router_prefix_"  # + outcome (prefix_hit, prefix_miss, missing_tokens): cache_aware's lookups (counter)
)
ACTIVE_WORKERS = "router_active_workers"


def replica_source(index: int) -> str:
    """The `source` of replica `index`'s rows (`replica-0`, ...)."""
    return f"{REPLICA_PREFIX}{index}"


def replica_of(source: str | None) -> int | None:
    """The replica index a row's `source` names (`replica-3` -> 3); None for any other source."""
    if source is None or not source.startswith(REPLICA_PREFIX):
        return None
    digits = source[len(REPLICA_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def is_fleet_row(source: str | None) -> bool:
    """A replica's or the router's row: what a fleet's claims read, and no single-engine claim does."""
    return source == ROUTER_SOURCE or replica_of(source) is not None


def worker_key(ours: str, index: int) -> str:
    """Where a router's per-worker value of replica `index` goes: `router_processed_requests_replica-0`."""
    return f"{ours}_{replica_source(index)}"


def policies_in(values: dict[str, float]) -> list[str]:
    """The policies a router row's decision counters name (`router_policy_decisions_<policy>_replica-<i>`)."""
    marker = "_" + REPLICA_PREFIX
    return sorted({k[len(DECISIONS_PREFIX) :].rsplit(marker, 1)[0] for k in values if k.startswith(DECISIONS_PREFIX)})
