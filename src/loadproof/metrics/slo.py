"""Per-request SLOs (`--slo`): what each measures, whether a request meets them, and the run's goodput and
attainment (docs/scenarios.md, "load"). A request is good when it succeeded and meets every SLO (value <=
target; TPOT 0 for a request of one token, as vLLM's goodput); failed, timed-out and cancelled requests are
never good and never dropped from the count of all.
"""

from __future__ import annotations

from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.conditioning import RunCount
from loadproof.metrics.distribution import percentile
from loadproof.metrics.latency import succeeded, tpot_ns
from loadproof.metrics.uncertainty import rate_interval, share_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

# the per-request SLOs `--slo` takes, and what each measures (seconds)
SLO_DEFINITIONS = {
    "ttft": "t_first_token - t_send",
    "tpot": "(e2el - ttft) / (output_tokens - 1); 0 for a request of one token",
    "itl": "the request's largest gap between token-bearing chunks; 0 with fewer than two",
    "itl_p99": "the p99 of the request's own gaps between token-bearing chunks (linear); 0 with fewer than two",
    "e2el": "t_last_token - t_send",
    "ttft_from_intended": "t_first_token - t_intended",
    "e2el_from_intended": "t_last_token - t_intended",
}


def slo_values(record: RequestRecord) -> dict[str, float] | None:
    """The request's value of every SLO in seconds; None for a request that did not succeed."""
    first, last = record.first_token_ns, record.last_token_ns
    if first is None or last is None or not succeeded(record):
        return None
    gaps = sorted(record.itl_ns())
    values = {
        "ttft": first - record.send_ns,
        "tpot": tpot_ns(record) or 0.0,
        "itl": gaps[-1] if gaps else 0.0,
        "itl_p99": percentile(gaps, 99.0) if gaps else 0.0,
        "e2el": last - record.send_ns,
    }
    if record.intended_send_ns is not None:
        values["ttft_from_intended"] = first - record.intended_send_ns
        values["e2el_from_intended"] = last - record.intended_send_ns
    return {k: v / NS_PER_S for k, v in values.items()}


def meets(values: dict[str, float] | None, slo: dict[str, float], only: str | None = None) -> bool:
    """Whether a request's values meet every SLO (or just `only`): value <= target; never when it failed."""
    if values is None:
        return False
    keys = [only] if only is not None else list(slo)
    return all(k in values and values[k] <= slo[k] for k in keys)


def slo_text(slo: dict[str, float]) -> str:
    return ", ".join(f"{k} <= {v * 1000:g} ms" if v < 1 else f"{k} <= {v:g} s" for k, v in slo.items())


def run_start_ns(records: list[RequestRecord], duration_s: float) -> int:
    """The start of a run's duration, back from its records' last end: the per-second series of a rate over
    `duration_s` (metrics/uncertainty.py) begins there."""
    return max((r.end_ns for r in records), default=0) - round(duration_s * NS_PER_S)


def slo_claims(
    records: list[RequestRecord],
    slo: dict[str, float],
    duration_s: float,
    scenario: str = "load",
    gaps: list[float] | None = None,
    run: RunCount | None = None,
) -> list[Claim]:
    """`<scenario>.slo`, good requests, attainment, goodput and each SLO's share (runs with `--slo`: load and
    replay, and throughput, sessions and ab, whose good tokens the energy and cost claims count); with `gaps`
    (each record's arrival gap, where a rescaled schedule fixed the count, metrics/conditioning.py), the shares'
    and goodput's intervals conditioned on each batch's arrivals (goodput's, given the `run`'s count, on its
    ends)."""
    if not slo or not records:
        return []
    values = [slo_values(r) for r in records]
    outcomes = [meets(v, slo) for v in values]  # in the records' order: a loaded engine's misses come in bursts
    good = sum(outcomes)
    claims = [
        fact(f"{scenario}.slo", slo_text(slo), "the per-request SLOs asked (--slo)"),
        count(
            f"{scenario}.good_requests",
            good,
            "requests",
            "requests that succeeded and met every SLO",
            direction="higher",
        ),
        number(
            f"{scenario}.slo_attainment_pct",
            100 * good / len(records),
            "%",
            "good requests / every request sent x 100 (failed, timed-out and cancelled ones count as not good)",
            2,
            direction="higher",
            interval=share_interval(good, len(records), outcomes=outcomes, covariate=gaps),
        ),
    ]
    if duration_s > 0:
        ends = [r.end_ns for r, v in zip(records, values, strict=True) if meets(v, slo)]
        claims.insert(
            2,
            number(
                f"{scenario}.goodput_rps",
                good / duration_s,
                "requests/s",
                "good requests / duration",
                3,
                direction="higher",
                interval=rate_interval(
                    ends,
                    [1.0] * good,
                    run_start_ns(records, duration_s),
                    duration_s,
                    good / duration_s,
                    None if gaps is None else [r.send_ns for r in records],
                    run,
                ),
            ),
        )
    for key in slo:
        each = [meets(v, slo, only=key) for v in values]
        met = sum(each)
        claims.append(
            number(
                f"{scenario}.slo.<slo>.met_pct",
                100 * met / len(records),
                "%",
                f"requests meeting {key} <= target ({SLO_DEFINITIONS.get(key, key)}) / every request sent x 100",
                2,
                direction="higher",
                parts={"slo": key},
                interval=share_interval(met, len(records), outcomes=each, covariate=gaps),
            )
        )
    return claims
