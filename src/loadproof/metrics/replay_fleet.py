"""A replay's requests as a fleet's router and replicas see them (`metrics.fleet_expectation`): each prefilled
request's blocks as `metrics.replay.cache_requests` keys them, at the replicas' block size, its send, and the session
the router reads: the plan's session of the request, where `--session-header` named a header vllm-router reads
(`routing.SESSION_HEADERS`; another header it does not see, and keys the request by its body).
"""

from __future__ import annotations

from typing import Any

from loadproof.metrics.fleet_expectation import FleetRequest
from loadproof.metrics.replay import SCENARIO, cache_request, prefilled
from loadproof.plans.replay import ReplayPlan
from loadproof.routing import SESSION_HEADERS


def fleet_requests(run: Any, plan: ReplayPlan, block_tokens: int) -> list[FleetRequest]:
    records = prefilled([r for r in run.records if r.scenario == SCENARIO], plan)
    header = plan.session_header
    read = header is not None and header.lower() in SESSION_HEADERS and len(plan.sessions) == len(plan.text_tokens)
    return [
        FleetRequest(cache_request(r, plan, block_tokens), r.send_ns, plan.sessions[r.batch or 0] if read else None)
        for r in records
    ]
