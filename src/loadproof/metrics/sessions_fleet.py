"""A sessions run's turns as a fleet's router and replicas see them (`metrics.fleet_expectation`): each turn that got a
first token (the priming request too), keyed as `metrics.sessions.prefix_requests` keys it at the replicas' block
size, its send, and its user's session where `--session-header` named a header vllm-router reads
(`routing.SESSION_HEADERS`; another it does not see, and keys each turn by its body).
"""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.metrics.fleet_expectation import FleetRequest
from loadproof.metrics.sessions import SCENARIO, prefix_requests
from loadproof.plans.sessions import SessionsPlan
from loadproof.records import RequestRecord
from loadproof.routing import SESSION_HEADERS


def fleet_requests(run: Any, plan: SessionsPlan, block_tokens: int) -> list[FleetRequest]:
    sent = sorted(
        (r for r in run.records if r.scenario == SCENARIO and r.prompt_tokens and r.first_token_ns is not None),
        key=lambda r: (r.send_ns, r.request_id),
    )
    cache = prefix_requests(sent, msgspec.structs.replace(plan, block_tokens=block_tokens))
    read = plan.session_header is not None and plan.session_header.lower() in SESSION_HEADERS
    return [FleetRequest(q, r.send_ns, session_of(plan, r) if read else None) for r, q in zip(sent, cache)]


def session_of(plan: SessionsPlan, record: RequestRecord) -> str | None:
    """The session id a turn carried: its user's (`prompt_id` `u<k>`); None for the priming request."""
    user = record.prompt_id or ""
    k = int(user[1:]) if user.startswith("u") and user[1:].isdigit() else -1
    return plan.session_ids[k] if 0 <= k < len(plan.session_ids) else None
