"""Sessions against a CPU tier for the KV cache (docs/scenarios.md, "sessions", "A CPU tier"): did the warm
turns whose history the GPU cache had evicted come back from the tier, and how long did that take beside the
transfer and beside recomputing?

Plans with the tier's size (`cpu_tier_tokens`) and the engine's (`kv_cache_tokens`, `block_tokens`):

- expected tier tokens = the warm turns' expected hits through a cache of max(GPU, tier) blocks - their hits
  through one of the GPU's size (metrics.prefix_cache.simulate; vLLM's native tier stores a copy of every
  block the GPU computes, so with a tier at least the GPU's size the two together hold about what the tier
  holds);
- the engine's tier tokens: `external_prefix_cache_hits_total`'s growth over the run (metrics.offload);
  served / expected x 100.

Plans with the bytes a token's KV takes (`kv_bytes_per_token`) and the measured host-to-device bandwidth
(`h2d_gbps`, 1e9 bytes/s), per successful warm turn i with cached_i = usage.prompt_tokens_details.cached_tokens:

- transfer_i = cached_i x kv_bytes_per_token / (h2d_gbps x 1e9): loading every cached token from the tier;
- recompute_i = cached_i x r, r = sum of the cold turns' TTFT / sum of their prompt_tokens (seconds a prompt
  token took to prefill in this run);
- bound_i = floor + transfer_i + (prompt_i - cached_i) x r, floor = the smallest TTFT of the run's successful
  warm turns (what the engine takes to answer a turn whose history it has: scheduling, one step, the first
  token's way back); within bound: TTFT_i <= bound_i.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.distribution import summarize
from loadproof.metrics.engine_agreement import bracket
from loadproof.metrics.latency import ttft_ns
from loadproof.metrics.offload import HITS
from loadproof.metrics.prefix_cache import PrefixRequest, simulate
from loadproof.metrics.uncertainty import ratio_interval, share_interval, stat_interval
from loadproof.plans.sessions import SessionsPlan
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S

STATS = ("p50", "max")


def ttft_s(r: RequestRecord) -> float:
    return ttft_ns(r) / NS_PER_S


def expected_tier_claims(
    requests: list[PrefixRequest],
    turns: list[int],
    plan: SessionsPlan,
    ok: list[RequestRecord],
    samples: list[EngineSample],
) -> list[Claim]:
    """`requests`: the successful turns (and a priming request) in send order as the prefix cache sees them,
    `turns` the indices of the users' turns among them; `ok` the successful turns."""
    block, gpu, tier = plan.block_tokens, plan.kv_cache_tokens, plan.cpu_tier_tokens
    if not (block and gpu and tier and requests):
        return []
    on_gpu = simulate(requests, gpu // block, block).hits
    with_tier = simulate(requests, max(gpu, tier) // block, block).hits
    expected = sum(max(0, with_tier[i] - on_gpu[i]) for i in turns)
    claims = [
        count(
            "sessions.tier.expected_tokens",
            expected,
            "tokens",
            "sum over the successful turns of the "
            "expected hit through a cache of max(kv_cache_tokens, cpu_tier_tokens) // block_tokens blocks "
            "- the expected hit through one of kv_cache_tokens // block_tokens (metrics.prefix_cache): the "
            "prompt tokens the CPU tier should supply",
            direction="neither",
        )
    ]
    around = bracket(samples, ok)
    if around is not None and HITS in around[1]:
        served = around[1][HITS] - around[0].get(HITS, 0.0)
        claims.append(
            count(
                "sessions.tier.served_tokens",
                round(served),
                "tokens",
                f"{HITS}'s growth between the "
                "/metrics samples bracketing the run: prompt tokens the engine's KV connector supplied",
                direction="higher",
            )
        )
        if expected > 0:
            claims.append(
                number(
                    "sessions.tier.served_over_expected_pct",
                    100 * served / expected,
                    "%",
                    "sessions.tier.served_tokens / sessions.tier.expected_tokens x 100",
                    2,
                    direction="higher",
                )
            )
    return claims


def transfer_claims(ok: list[RequestRecord], plan: SessionsPlan) -> list[Claim]:
    if not (plan.kv_bytes_per_token and plan.h2d_gbps):
        return []
    # (TTFT s, prompt tokens) of each cold turn; (TTFT s, prompt tokens, cached tokens) of each warm one
    cold = [
        (ttft_s(r), r.prompt_tokens) for r in ok if r.batch == 0 and r.prompt_tokens and r.first_token_ns is not None
    ]
    warm = [
        (ttft_s(r), r.prompt_tokens, r.cached_tokens)
        for r in ok
        if r.batch > 0 and r.prompt_tokens and r.cached_tokens is not None and r.first_token_ns is not None
    ]
    if not cold or not warm:
        return []
    per_token = sum(ttft for ttft, _ in cold) / sum(prompt for _, prompt in cold)
    rate = plan.h2d_gbps * 1e9 / plan.kv_bytes_per_token  # tokens a second the link moves
    floor = min(ttft for ttft, _, _ in warm)
    transfer = [cached / rate for _, _, cached in warm]
    recompute = [cached * per_token for _, _, cached in warm]
    bound = [floor + t + (prompt - cached) * per_token for t, (_, prompt, cached) in zip(transfer, warm)]
    over = [ttft / b for (ttft, _, _), b in zip(warm, bound) if b > 0]
    claims = [
        number(
            "sessions.tier.cold_s_per_token",
            per_token,
            "s/token",
            "sum of the cold turns' TTFT / sum "
            "of their prompt_tokens: r, the seconds a prompt token took to prefill in this run",
            8,
            direction="neither",
            interval=ratio_interval([ttft for ttft, _ in cold], [float(prompt) for _, prompt in cold]),
        ),
        number(
            "sessions.tier.floor_s",
            floor,
            "s",
            "the smallest TTFT of the successful warm turns: the bound's fixed part",
            4,
            direction="neither",
        ),
    ]
    for name, values, how in (
        (
            "transfer_s",
            transfer,
            "cached_tokens x kv_bytes_per_token / (h2d_gbps x 1e9): loading the turn's "
            "cached tokens over the host-to-device link",
        ),
        ("recompute_s", recompute, "cached_tokens x sessions.tier.cold_s_per_token: prefilling them again"),
        (
            "bound_s",
            bound,
            "sessions.tier.floor_s + transfer + (prompt_tokens - cached_tokens) x sessions.tier.cold_s_per_token",
        ),
        ("ttft_over_bound", over, "TTFT / bound"),
    ):
        summary = summarize(values)
        if summary is None:
            continue
        for stat in STATS:
            claims.append(
                number(
                    f"sessions.tier.{name}.<stat>",
                    summary.stat(stat),
                    "ratio" if name == "ttft_over_bound" else "s",
                    f"{stat} over the successful warm turns of {how} ({summary.method})",
                    4,
                    direction="lower" if name == "ttft_over_bound" else "neither",
                    parts={"stat": stat},
                    # the transfer, recompute and bound are the model's, of the turns' cached tokens: no interval
                    interval=stat_interval(values, stat) if name == "ttft_over_bound" else None,
                )
            )
    within = sum(ttft <= b for (ttft, _, _), b in zip(warm, bound))
    claims.append(
        number(
            "sessions.tier.within_bound_pct",
            100 * within / len(warm),
            "%",
            "successful warm turns whose TTFT <= its bound / successful warm turns reporting cached tokens x 100",
            2,
            direction="higher",
            interval=share_interval(within, len(warm)),
        )
    )
    return claims


__all__ = ["expected_tier_claims", "transfer_claims"]
