"""A KV connector's tier as the engine counts it (docs/scenarios.md, "A CPU tier for the KV cache"): over the
run, from the /metrics samples that bracket it (metrics.engine_agreement's pair), how many prompt tokens
vLLM asked its external prefix cache for and how many it had, and which tier supplied cached tokens.

vLLM's counters: `external_prefix_cache_queries_total` and `external_prefix_cache_hits_total` (tokens; a
KV connector's: the CPU tier of --kv-offloading-size, LMCache, another instance) and, from vLLM 0.32,
`prompt_tokens_cached_by_source_total` one series per `source` (device: the GPU's own prefix cache; host: the
CPU tier; disk; p2p; external_unspecified), kept apart as `prompt_tokens_cached_by_source_total_<source>`.

- external hit rate = hits' growth / queries' growth x 100, where the queries grew;
- tokens by source: each source's growth, listed where a source other than the device's grew.
Without a connector the external counters stay at 0 and nothing is claimed, never a zero.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.engine_agreement import bracket
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample

QUERIES = "external_prefix_cache_queries_total"
HITS = "external_prefix_cache_hits_total"
BY_SOURCE = "prompt_tokens_cached_by_source_total_"  # + the source
WINDOW = "growth between the /metrics samples bracketing the run"


def offload_claims(records: list[RequestRecord], samples: list[EngineSample]) -> list[Claim]:
    around = bracket(samples, records)
    if around is None:
        return []
    first, last = around

    def grew(name: str) -> float:
        return last.get(name, 0.0) - first.get(name, 0.0) if name in last else 0.0

    claims: list[Claim] = []
    queried = grew(QUERIES)
    if queried > 0:
        hits = grew(HITS)
        claims += [
            count(
                "offload.external_queried_tokens", round(queried), "tokens", f"{QUERIES}: {WINDOW}", direction="neither"
            ),
            count("offload.external_hit_tokens", round(hits), "tokens", f"{HITS}: {WINDOW}", direction="higher"),
            number(
                "offload.external_hit_pct",
                100 * hits / queried,
                "%",
                f"{HITS} / {QUERIES} x 100, each the "
                f"{WINDOW}: the share of the prompt tokens asked of the connector's tier that it had",
                2,
                direction="higher",
            ),
        ]
    sources = {k[len(BY_SOURCE) :]: grew(k) for k in last if k.startswith(BY_SOURCE)}
    if any(v > 0 for s, v in sources.items() if s != "device"):
        for source, tokens in sorted(sources.items()):
            claims.append(
                count(
                    "offload.cached_tokens.<source>",
                    round(tokens),
                    "tokens",
                    f"prompt_tokens_cached_by_source_total{{source}}: {WINDOW}; the tier that supplied "
                    "them (device: the GPU's own prefix cache; host: the CPU tier)",
                    direction="neither",
                    parts={"source": source},
                )
            )
    return claims


__all__ = ["offload_claims"]
