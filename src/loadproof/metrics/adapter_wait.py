"""How long the adapters of a model mix waited for a slot (docs/scenarios.md, "load", "Model and adapter mixes",
"Waiting for a slot"), beside what loading one costs (`metrics.adapter_churn`): plans that name the base model the
adapters are served on (`base_model`, recorded with `--model-mix` since these figures; runs before have none).

vLLM admits a request of an adapter only while the adapters in its running batch leave a slot (`max_loras`);
while two adapters keep the slots busy, a third one's requests wait, however long, and their TTFT is that wait.
From the records, for each model of the mix:

- unstarted_s: the time during which the model had requests in flight (sent, not ended) and none of them had
  its first token: all of them waiting (an adapter's, for a slot where the slots are taken; the base model's,
  in the engine's queue, the reference);
- ttft_over_base_s.<stat> (the adapters: every model of the mix but the base): over its successful requests,
  TTFT - the p50 TTFT of the `NEAREST` successful base-model requests sent nearest in time (ties: the earlier):
  what the adapter added to the wait and the prefill a base request had at the same time and load.

From the engine: vLLM's `lora_requests_info` lists an adapter once a request of it has been scheduled, until its
last ends; its two labels carry that one set (`running_lora_adapters`, `waiting_lora_adapters`: llm-d-router
issue 2605), so an adapter all of whose requests wait for a slot is listed in neither. engine_unlisted_adapter_s
= the sum over consecutive /metrics samples t_k, t_k+1 between the first send and the last end of max(0,
adapters with a request in flight at t_k by the records - adapters the gauge listed running at t_k) x
(t_k+1 - t_k): adapter-seconds of waiting as the engine shows it (sampled), to set beside the sum of the
adapters' unstarted_s. Standard library only.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from statistics import median

from loadproof.metrics.claims import Claim, number
from loadproof.metrics.distribution import summarize
from loadproof.metrics.latency import succeeded, ttft_ns
from loadproof.metrics.uncertainty import stat_interval
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S

NEAREST = 5  # base-model requests whose TTFT a request's is set against
LISTED = "lora_running_adapters"
STATS = ("p50", "max")


def unstarted_ns(records: Sequence[RequestRecord]) -> int:
    """The time during which some of `records` were in flight (send to end) and none had its first token."""
    events = []  # (time, change in flight, change started); at one instant ends first, then sends and first tokens
    for r in records:
        if not r.send_ns:
            continue
        started = r.first_token_ns is not None and r.first_token_ns < r.end_ns
        events += [(r.send_ns, 1, 0), (r.end_ns, -1, -1 if started else 0)]
        if started and r.first_token_ns is not None:
            events.append((r.first_token_ns, 0, 1))
    events.sort(key=lambda e: (e[0], e[1] >= 0))
    total = flying = going = 0
    for (t, d_flying, d_going), after in zip(events, events[1:] + [(0, 0, 0)]):
        flying, going = flying + d_flying, going + d_going
        if flying > 0 and going == 0 and after[0] > t:
            total += after[0] - t
    return total


def over_base_s(request: RequestRecord, base: Sequence[RequestRecord], sends: Sequence[int]) -> float:
    """The request's TTFT - the p50 TTFT of the NEAREST base requests sent nearest to it (`base` successful and
    in send order, `sends` their send times), seconds."""
    hi = bisect_left(sends, request.send_ns)
    lo = hi - 1
    near: list[RequestRecord] = []
    while len(near) < NEAREST and (lo >= 0 or hi < len(base)):
        if hi >= len(base) or (lo >= 0 and request.send_ns - sends[lo] <= sends[hi] - request.send_ns):
            near.append(base[lo])
            lo -= 1
        else:
            near.append(base[hi])
            hi += 1
    return (ttft_ns(request) - median(ttft_ns(b) for b in near)) / NS_PER_S


def unlisted_adapter_ns(records: Sequence[RequestRecord], adapters: set[str], samples: Sequence[EngineSample]) -> int:
    """Adapter-nanoseconds the engine did not list an adapter the records had in flight (the module's docstring)."""
    mine = sorted((r for r in records if r.model in adapters and r.send_ns), key=lambda r: r.send_ns)
    if not mine:
        return 0
    first, last = mine[0].send_ns, max(r.end_ns for r in mine)
    during = sorted((s for s in samples if first <= s.t_ns <= last and LISTED in s.values), key=lambda s: s.t_ns)
    ends = sorted((r.end_ns, r.model) for r in mine)
    flying: dict[str, int] = {}
    sent = ended = 0
    total = 0
    for sample, after in zip(during, during[1:]):
        while sent < len(mine) and mine[sent].send_ns <= sample.t_ns:
            flying[mine[sent].model] = flying.get(mine[sent].model, 0) + 1
            sent += 1
        while ended < len(ends) and ends[ended][0] <= sample.t_ns:
            flying[ends[ended][1]] -= 1
            ended += 1
        adapters_flying = sum(n > 0 for n in flying.values())
        total += max(0, adapters_flying - round(sample.values[LISTED])) * (after.t_ns - sample.t_ns)
    return total


def wait_claims(
    records: list[RequestRecord], models: Sequence[str], base_model: str | None, samples: Sequence[EngineSample]
) -> list[Claim]:
    """`load.model.<model>.unstarted_s`, `load.model.<adapter>.ttft_over_base_s.<stat>` and
    `load.lora.engine_unlisted_adapter_s` for a mix (`models`) with its base model named; none otherwise."""
    if base_model is None or base_model not in models or len(models) < 2:
        return []
    base = sorted((r for r in records if r.model == base_model and succeeded(r)), key=lambda r: r.send_ns)
    sends = [r.send_ns for r in base]
    claims: list[Claim] = []
    for model in models:
        mine = [r for r in records if r.model == model]
        if not mine:
            continue
        parts = {"model": model}
        claims.append(
            number(
                "load.model.<model>.unstarted_s",
                unstarted_ns(mine) / NS_PER_S,
                "s",
                "the time during which the model had requests in flight (sent, not ended) and none of them had its "
                "first token: all waiting (an adapter's, for a slot where the slots are taken; the base model's, in "
                "the engine's queue)",
                3,
                direction="lower",
                parts=parts,
            )
        )
        if model == base_model or not base:
            continue
        over = [over_base_s(r, base, sends) for r in mine if succeeded(r)]
        summary = summarize(over)
        if summary is None:
            continue
        for stat in STATS:
            claims.append(
                number(
                    "load.model.<model>.ttft_over_base_s.<stat>",
                    summary.stat(stat),
                    "s",
                    f"{stat} over the adapter's successful requests of TTFT - the p50 TTFT of the {NEAREST} "
                    f"successful requests of the base model ({base_model}) sent nearest in time: what the adapter "
                    f"added, waiting for a slot or loading ({summary.method})",
                    4,
                    direction="lower",
                    parts={**parts, "stat": stat},
                    interval=stat_interval(over, stat),
                )
            )
    listed = [s for s in samples if LISTED in s.values]
    if listed:
        adapters = set(models) - {base_model}
        claims.append(
            number(
                "load.lora.engine_unlisted_adapter_s",
                unlisted_adapter_ns(records, adapters, listed) / NS_PER_S,
                "adapter-s",
                "sum over consecutive /metrics samples t_k, t_k+1 between the adapters' first send and last end of "
                "max(0, adapters with a request in flight at t_k by the records - adapters lora_requests_info listed "
                "running at t_k) x (t_k+1 - t_k): adapters whose every request waited, as the engine shows them",
                2,
                direction="lower",
            )
        )
    return claims


__all__ = ["NEAREST", "over_base_s", "unlisted_adapter_ns", "unstarted_ns", "wait_claims"]
