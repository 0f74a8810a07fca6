"""The relay's settings, fixed when it starts."""

from __future__ import annotations

from dataclasses import dataclass, field

from loadproof.relay.prefill import PrefillConfig


@dataclass(frozen=True)
class RelayConfig:
    upstream: str
    max_in_flight: int = 64
    deadline_s: float = 3600.0
    heartbeat_s: float = 5.0
    body_timeout_s: float = 60.0  # the request line, headers and body must arrive within this
    max_body_bytes: int = 64 * 1024 * 1024  # a 1M-token prompt is about 4-7 MB of JSON
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    upstream_keepalive_s: float = 4.0  # shorter than uvicorn's 5 s default keep-alive on the engine side
    upstream_api_key: str | None = field(default=None, repr=False)
    idle_timeout_s: float = 75.0  # a kept-alive client connection with no request in progress
    prefill: PrefillConfig | None = None  # a disaggregated pair: generation is prefilled there first (relay.prefill)
