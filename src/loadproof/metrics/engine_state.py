"""The engine's own state while a schedule ran, from its /metrics samples (docs/scenarios.md, "load"): the
most requests waiting and running, the LoRA adapters it listed, its KV cache's highest use and the
preemptions between the schedule's start and the last response's end.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, Direction, count, number
from loadproof.rundir import EngineSample

# the engine's gauges read at their most: (metric, claim, what, unit, direction)
MAXIMA: tuple[tuple[str, str, str, str, Direction], ...] = (
    ("num_requests_waiting", "load.engine_waiting_max", "most requests waiting", "requests", "lower"),
    ("num_requests_running", "load.engine_running_max", "most requests running", "requests", "neither"),
    # vLLM with LoRA: the adapters its lora_requests_info gauge lists for the running batch and the queue
    (
        "lora_running_adapters",
        "load.lora.engine_running_adapters_max",
        "most LoRA adapters the engine listed as running (vLLM's lora_requests_info, running_lora_adapters)",
        "adapters",
        "neither",
    ),
    (
        "lora_waiting_adapters",
        "load.lora.engine_waiting_adapters_max",
        "most LoRA adapters the engine listed as waiting (lora_requests_info, waiting_lora_adapters)",
        "adapters",
        "lower",
    ),
    # vLLM 0.32: requests the scheduler passed over for a transient reason (in a LoRA mix: a slot), by its gauge
    (
        "num_requests_waiting_by_reason_deferred",
        "load.engine_deferred_max",
        "most requests the engine listed as waiting deferred (vLLM's num_requests_waiting_by_reason, reason deferred: "
        "for a LoRA slot, a KV transfer or a grammar)",
        "requests",
        "lower",
    ),
)


def engine_claims(samples: list[EngineSample], t0: int, end_ns: int) -> list[Claim]:
    """The engine's queue, batch, preemptions and KV cache while the schedule ran, from its /metrics."""
    ordered = sorted(samples, key=lambda s: s.t_ns)
    during = [s.values for s in ordered if t0 <= s.t_ns <= end_ns]
    claims: list[Claim] = []
    for key, name, what, unit, direction in MAXIMA:
        seen = [v[key] for v in during if key in v]
        if seen:
            claims.append(
                count(
                    name,
                    int(round(max(seen))),
                    unit,
                    f"{what} in a /metrics sample taken between the schedule's start and the last response's end",
                    direction=direction,
                )
            )
    kv = [v["kv_cache_usage_perc"] for v in during if "kv_cache_usage_perc" in v]
    if kv:
        claims.append(
            number(
                "load.engine_kv_usage_max_pct",
                max(kv) * 100,
                "%",
                "highest kv_cache_usage_perc x 100 "
                "in a sample taken between the schedule's start and the last response's end",
                1,
                direction="neither",
            )
        )
    before = [s.values for s in ordered if s.t_ns <= t0 and "num_preemptions_total" in s.values]
    after = [s.values for s in ordered if s.t_ns >= end_ns and "num_preemptions_total" in s.values]
    if before and after:
        grown = after[-1]["num_preemptions_total"] - before[-1]["num_preemptions_total"]
        claims.append(
            count(
                "load.engine_preemptions",
                int(round(grown)),
                "preemptions",
                "growth of "
                "num_preemptions_total from the last sample at or before the schedule's start to the last "
                "at or after the last response's end",
                direction="lower",
            )
        )
    return claims
