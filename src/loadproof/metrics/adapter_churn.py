"""What a cold LoRA adapter costs (docs/scenarios.md, "load", "Model and adapter mixes", "Adapter churn"): in
a run with a model mix against a deployment whose profile serves adapters (`[lora]`, the manifest's
profile), the requests for adapters replayed in send order through a least-recently-used cache of the
engine's adapter slots (`max_cpu_loras`, else `max_loras`, as vLLM sizes its cache of loaded adapters): a
request is cold when its adapter was not in the cache at its send (the engine loads it from its folder
first), warm otherwise. More adapters than slots is churn.

- cold TTFT p50, warm TTFT p50: t_first_token - t_send over the successful cold, warm requests;
- cold cost = cold TTFT p50 - warm TTFT p50 (both present).

The replay is the send order's; an engine serving several requests at once may load in another order, so the
figures read as "cold by the replay". Standard library only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.distribution import summarize
from loadproof.metrics.uncertainty import median_difference_interval, stat_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

REPLAY = (
    "the adapters' requests replayed in send order through an LRU cache of lora.slots adapters (the "
    "profile's max_cpu_loras, else max_loras)"
)


def lora_of(profile: Any) -> tuple[list[str], int] | None:
    """The profile's adapters and the engine's adapter slots; None without a `[lora]` section."""
    lora = profile.get("lora") if isinstance(profile, dict) else None
    if not isinstance(lora, dict) or not isinstance(lora.get("adapters"), dict):
        return None
    slots = lora.get("max_cpu_loras") or lora.get("max_loras") or 1
    return list(lora["adapters"]), int(slots)


def cold_flags(records: list[RequestRecord], adapters: set[str], slots: int) -> list[tuple[RequestRecord, bool]]:
    """Each adapter request in send order with whether it was cold in the LRU replay."""
    cache: OrderedDict[str, None] = OrderedDict()
    out = []
    for record in sorted((r for r in records if r.model in adapters and r.send_ns), key=lambda r: r.send_ns):
        cold = record.model not in cache
        cache[record.model] = None
        cache.move_to_end(record.model)
        while len(cache) > slots:
            cache.popitem(last=False)
        out.append((record, cold))
    return out


def churn_claims(records: list[RequestRecord], profile: Any) -> list[Claim]:
    """`load.lora.*` for a run whose records name their models and whose profile serves adapters."""
    found = lora_of(profile)
    if found is None or not any(r.model for r in records):
        return []
    adapters, slots = found
    flags = cold_flags(records, set(adapters), slots)
    if not flags:
        return []
    asked = len({r.model for r, _ in flags})
    claims = [
        count(
            "load.lora.adapters",
            asked,
            "adapters",
            "distinct adapters the run's requests asked for",
            direction="neither",
        ),
        count(
            "load.lora.slots",
            slots,
            "adapters",
            "the engine's adapter slots (the profile's max_cpu_loras, else max_loras)",
            direction="neither",
        ),
        count(
            "load.lora.cold_requests",
            sum(c for _, c in flags),
            "requests",
            f"requests cold by {REPLAY}",
            direction="lower",
        ),
    ]
    ttft, values = {}, {}
    for phase, cold in (("cold", True), ("warm", False)):
        values[phase] = [
            (r.first_token_ns - r.send_ns) / NS_PER_S
            for r, c in flags
            if c is cold and r.ok and r.first_token_ns is not None
        ]
        summary = summarize(values[phase])
        if summary is not None:
            ttft[phase] = summary.stat("p50")
            claims.append(
                number(
                    f"load.lora.{phase}_ttft_s.p50",
                    ttft[phase],
                    "s",
                    f"p50 of t_first_token - t_send "
                    f"over the successful {phase} adapter requests, {phase} by {REPLAY} "
                    f"({summary.method})",
                    4,
                    direction="lower",
                    interval=stat_interval(values[phase], "p50"),
                )
            )
    if len(ttft) == 2:
        claims.append(
            number(
                "load.lora.cold_cost_s",
                ttft["cold"] - ttft["warm"],
                "s",
                "load.lora.cold_ttft_s.p50 - load.lora.warm_ttft_s.p50: what loading an adapter adds to a first token",
                4,
                direction="lower",
                interval=median_difference_interval(values["cold"], values["warm"]),
            )
        )
    return claims


__all__ = ["churn_claims", "cold_flags"]
