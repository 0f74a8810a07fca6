"""One engine /metrics sample, a row of `metrics.jsonl` (written by telemetry.server_metrics' scraper).

`values` maps loadproof's metric names (`num_requests_running`, `kv_cache_usage_perc`, counters such as
`prompt_tokens_total`) to the engine's value, summed over its label sets; a name is absent when the
engine did not expose it. `t_ns` is on the run's monotonic clock (for a Prometheus source, placed at
the scrape that saw it). `source` says whose /metrics when a run samples several (soak: `engine`, `relay`; a
fleet: `replica-<i>`, `router`, and the fleet's own row `engine`, `rundir.fleet_keys`).

Version 1: the shape every run has written (none recorded a version).
"""

from __future__ import annotations

from typing import ClassVar

import msgspec


class EngineSample(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    version: ClassVar[int] = 1

    t_ns: int
    wall_time_s: float | None = None
    values: dict[str, float] = {}
    source: str | None = None


__all__ = ["EngineSample"]
