"""A model mix's figures (`--model-mix`, docs/scenarios.md, "load"): each model's or adapter's, from the
records that asked for it (`RequestRecord.model`): its share of the records, failures, TTFT and TPOT p50 and
p99 over its successful requests, its output tokens / the run's duration, and with an SLO its good requests
and attainment over its records. Load's, replay's (renamed) and sessions' (over its turns).
"""

from __future__ import annotations

from typing import Any

from loadproof.metrics.claims import Claim, count, number
from loadproof.metrics.distribution import summarize
from loadproof.metrics.latency import succeeded, tpot_ns, ttft_ns
from loadproof.metrics.slo import meets, run_start_ns, slo_values
from loadproof.metrics.uncertainty import rate_interval, share_interval, stat_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

MODEL_STATS = ("p50", "p99")


def model_claims(
    records: list[RequestRecord], mix: list[Any], slo: dict[str, float], duration_s: float, scenario: str = "load"
) -> list[Claim]:
    """`<scenario>.model.<model>.*` for each model of a `--model-mix` (`mix`: its MixedModel entries); none
    without a mix. Load's and replay's (renamed), and sessions' over its turns."""
    claims: list[Claim] = []
    pre = f"{scenario}.model.<model>"
    for mixed in mix:
        rows = [r for r in records if r.model == mixed.model]
        ok = [r for r in rows if succeeded(r)]
        parts = {"model": mixed.model}
        claims += [
            count(
                f"{pre}.requests",
                len(rows),
                "requests",
                "records whose body asked for this model",
                direction="neither",
                parts=parts,
            ),
            number(
                f"{pre}.share_pct",
                100 * len(rows) / len(records) if records else 0.0,
                "%",
                "this model's records / every record x 100 (the mix's weight, as drawn)",
                2,
                direction="neither",
                parts=parts,
            ),
            count(
                f"{pre}.failed_requests",
                len(rows) - len(ok),
                "requests",
                "this model's records that failed, timed out, were cancelled or got no token",
                direction="lower",
                parts=parts,
            ),
        ]
        for name, values in (
            ("ttft_s", [ttft_ns(r) / NS_PER_S for r in ok]),
            ("tpot_s", [t / NS_PER_S for t in map(tpot_ns, ok) if t is not None]),
        ):
            summary = summarize(values)
            if summary is None:
                continue
            for stat in MODEL_STATS:
                claims.append(
                    number(
                        f"{pre}.{name}.<stat>",
                        summary.stat(stat),
                        "s",
                        f"{stat} of {'t_first_token - t_send' if name == 'ttft_s' else 'TPOT'} over this "
                        f"model's successful requests ({summary.method})",
                        4,
                        direction="lower",
                        parts={**parts, "stat": stat},
                        interval=stat_interval(values, stat),
                    )
                )
        if duration_s > 0:
            tokens = [float(r.output_tokens or 0) for r in ok]
            claims.append(
                number(
                    f"{pre}.output_tokens_per_s",
                    sum(tokens) / duration_s,
                    "tokens/s",
                    "sum of usage.completion_tokens of this model's successful requests / the run's duration",
                    1,
                    direction="higher",
                    parts=parts,
                    interval=rate_interval(
                        [r.end_ns for r in ok],
                        tokens,
                        run_start_ns(records, duration_s),
                        duration_s,
                        sum(tokens) / duration_s,
                    ),
                )
            )
        if slo and rows:
            good = sum(meets(slo_values(r), slo) for r in rows)
            claims += [
                count(
                    f"{pre}.good_requests",
                    good,
                    "requests",
                    "this model's requests that succeeded and met every SLO",
                    direction="higher",
                    parts=parts,
                ),
                number(
                    f"{pre}.slo_attainment_pct",
                    100 * good / len(rows),
                    "%",
                    "this model's good requests / its records x 100",
                    2,
                    direction="higher",
                    parts=parts,
                    interval=share_interval(good, len(rows)),
                ),
            ]
    return claims
