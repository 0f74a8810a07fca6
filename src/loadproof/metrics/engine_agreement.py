"""The client's figures beside the engine's own counters for the same run (issue: verified against vLLM).

Needs /metrics samples that bracket the run: one at or before the first send and one at or after the
last response ends (every scenario takes them). Over that interval:
- prompt tokens: the sum of `usage.prompt_tokens` of the requests that got a first token, beside the
  growth of `vllm:prompt_tokens_total` (vLLM counts a prompt when its prefill completes);
- generation tokens: the sum of `usage.completion_tokens` of every request, cancelled ones included,
  beside the growth of `vllm:generation_tokens_total` (tokens the engine made after a client left
  never reach the client);
- mean TTFT: the client's send -> first token, beside the growth of the engine's TTFT histogram sum over
  its count (the engine's clock starts when the request reaches it, after HTTP and tokenization).
Differences are (client - engine) / engine. An embeddings run (every record a vector's) has only the prompt
tokens to set beside the engine's: it generates nothing, and its first token is the whole answer. A run with a
record on a route whose usage counts other prompt tokens than the engine's counter (its adapter's
`prompt_usage_counted_by_engine` false: a transcription's usage counts the audio's encoder frames, vLLM's
counter the decoder's prompt alone) has no prompt-token pair since version 3:
`crosscheck.prompt_tokens.not_comparable` says why, and every other pair stays (a run of version 2 or before
recomputes its pair as it was published).

The engine's counters count every request that reached it, the run's and any other: a supervisor's liveness
probe (`loadproof serve` sends one when the engine's counters stood still for a probe interval, as they do
between a sessions run's turns), a warm-up, another client. Their number shows in the TTFT histogram's count
beside the run's. Their TTFTs are not the run's to know, and a few short probes move the engine's mean far
from the run's, so since version 2 (`VERSION`, recorded in the manifest as `crosscheck`) the mean TTFTs are
set side by side only when the engine counted exactly the run's first tokens; otherwise
`crosscheck.ttft_mean_s.not_comparable` says how many it counted that the run did not send (or missed), in
place of the engine's mean and the difference. A run without the field is version 1: the means side by side
whatever the counts, as it was published.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.disaggregation import ttft_crosscheck_formula
from loadproof.protocol.routes import ROUTES, route_of
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.units import NS_PER_S

VERSION = 3  # the crosscheck's version, recorded in each run's manifest as `crosscheck` (None there: 1)

# the samples of the engine the run measured: unlabelled, or labelled `engine` where a run samples several
# (soak's relay, an A/B run's arms: each arm's own, which one bracket cannot pair)
ENGINE_SOURCES = (None, "engine")


def bracket(
    samples: list[EngineSample], records: list[RequestRecord]
) -> tuple[dict[str, float], dict[str, float]] | None:
    """The engine's values at the last sample at or before the first send and the last at or after the end of
    the last response; None without both."""
    samples = [s for s in samples if s.source in ENGINE_SOURCES]
    if not samples or not records:
        return None
    ordered = sorted(samples, key=lambda s: s.t_ns)
    start = min(r.send_ns for r in records)
    end = max(r.end_ns for r in records)
    before = [s for s in ordered if s.t_ns <= start]
    after = [s for s in ordered if s.t_ns >= end]
    if not before or not after:
        return None
    return before[-1].values, after[-1].values


def agreement_claims(records: list[RequestRecord], samples: list[EngineSample], version: int = VERSION) -> list[Claim]:
    """The crosscheck's claims, as its `version` computes them (the run's manifest records which)."""
    around = bracket(samples, records)
    if around is None:
        return []
    first, last = around
    claims: list[Claim] = []

    def pair(name: str, client: float, engine: float | None, unit: str, what: str, decimals: int) -> None:
        # an agreement check, not a performance figure: no side is better
        claims.append(
            number(f"crosscheck.{name}.client", client, unit, f"client: {what}", decimals, direction="neither")
        )
        if engine is None:  # not the same requests: the caller says why
            return
        claims.append(
            number(
                f"crosscheck.{name}.engine",
                engine,
                unit,
                "engine: growth of its own counter between the /metrics samples bracketing the run",
                decimals,
                direction="neither",
            )
        )
        if engine:
            claims.append(
                number(
                    f"crosscheck.{name}.diff_pct",
                    (client - engine) / engine * 100,
                    "%",
                    "(client - engine) / engine x 100",
                    2,
                    direction="neither",
                )
            )

    if "prompt_tokens_total" in first and "prompt_tokens_total" in last:
        apart = sorted({r.endpoint for r in records if not _prompt_usage_counted_by_engine(r.endpoint)})
        if apart and version >= 3:  # not the same tokens: said in place of the pair
            claims.append(prompt_tokens_not_comparable(apart))
        else:
            client = sum(r.prompt_tokens or 0 for r in records if r.first_token_ns is not None)
            pair(
                "prompt_tokens",
                client,
                last["prompt_tokens_total"] - first["prompt_tokens_total"],
                "tokens",
                "sum of usage.prompt_tokens of requests that got a first token",
                0,
            )
    # a pooling route's answers have no generated token, no first token of their own (a route no adapter here
    # knows, a plug-in's, is taken as generating: its records' own tokens say what it did)
    if all(r.endpoint in ROUTES and route_of(r.endpoint).pooling for r in records):
        return claims
    if "generation_tokens_total" in first and "generation_tokens_total" in last:
        client = sum(r.output_tokens or 0 for r in records)
        pair(
            "generation_tokens",
            client,
            last["generation_tokens_total"] - first["generation_tokens_total"],
            "tokens",
            "sum of usage.completion_tokens of every request, cancelled ones included",
            0,
        )
    keys = ("ttft_seconds_sum", "ttft_seconds_count")
    if all(k in first and k in last for k in keys):
        engine_count = last["ttft_seconds_count"] - first["ttft_seconds_count"]
        # behind a disaggregated pair the engine read is the decode instance: its TTFT starts after the prefill hop
        ttfts = [(r.ttft_ns - (r.prefill_hop_ns or 0)) / NS_PER_S for r in records if r.ttft_ns is not None]
        if engine_count > 0 and ttfts:
            engine = (last["ttft_seconds_sum"] - first["ttft_seconds_sum"]) / engine_count
            other = round(engine_count) - len(ttfts)  # first tokens the engine counted beyond the run's (< 0: fewer)
            comparable = version < 2 or other == 0
            pair(
                "ttft_mean_s",
                sum(ttfts) / len(ttfts),
                engine if comparable else None,
                "s",
                ttft_crosscheck_formula(records),  # behind a disaggregated pair: the decode side, said so
                3,
            )
            if not comparable:
                claims.append(not_comparable(other, round(engine_count), len(ttfts)))
            claims.append(
                count(
                    "crosscheck.ttft_count.client",
                    len(ttfts),
                    "requests",
                    "requests of the run that got a first token",
                    direction="neither",
                )
            )
            claims.append(
                count(
                    "crosscheck.ttft_count.engine",
                    int(engine_count),
                    "requests",
                    "growth of the TTFT histogram's count; more than the client's means other "
                    "requests ran meanwhile (a supervisor's probe, a warm-up) and the means differ",
                    direction="neither",
                )
            )
    return claims


def not_comparable(other: int, engine: int, client: int) -> Claim:
    """Why the mean TTFTs are not set side by side: the engine's is over other requests than the run's."""
    if other > 0:
        why = (
            f"not comparable: {other} engine request(s) not sent by this run (the engine counted {engine} first "
            f"tokens, the run received {client}; a supervisor's liveness probe, a warm-up, another client)"
        )
    else:
        why = (
            f"not comparable: the engine counted {-other} first token(s) fewer than this run received ({engine} "
            f"against {client}; a restart resets its counters, or --engine-metrics reads another engine)"
        )
    return fact(
        "crosscheck.ttft_mean_s.not_comparable",
        why,
        "stated in place of crosscheck.ttft_mean_s.engine and .diff_pct when the growth of the engine's TTFT "
        "histogram count differs from the run's requests with a first token (crosscheck version 2)",
    )


def _prompt_usage_counted_by_engine(endpoint: str) -> bool:
    """Whether a record's usage.prompt_tokens counts what the engine's prompt-token counter counts (its route's
    `prompt_usage_counted_by_engine`; a route no adapter here knows, a plug-in's, is taken to)."""
    return endpoint not in ROUTES or route_of(endpoint).prompt_usage_counted_by_engine


def prompt_tokens_not_comparable(routes: list[str]) -> Claim:
    """Why the prompt tokens are not set side by side: the run's usage counts other tokens than the engine's
    counter (a transcription's audio frames beside its decoder's tokens, the counter the decoder's alone)."""
    return fact(
        "crosscheck.prompt_tokens.not_comparable",
        f"not comparable: usage.prompt_tokens on the {', '.join(routes)} route counts other tokens than the "
        "engine's prompt-token counter (a transcription's usage counts the audio's encoder frames with the "
        "decoder's prompt, the counter the decoder's prompt alone)",
        "stated in place of crosscheck.prompt_tokens.client, .engine and .diff_pct when a record's route says its "
        "usage.prompt_tokens is not what the engine counts (the route adapter's prompt_usage_counted_by_engine; "
        "crosscheck version 3)",
    )
