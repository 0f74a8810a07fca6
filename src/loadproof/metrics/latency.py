"""Each request's latencies (docs/scenarios.md, "load"), as pure functions of its record, and their statistics.

Definitions follow vLLM's `bench serve` (0.32, `benchmarks/serve.py`, `calculate_metrics`) wherever it
has one, so a cross-measurement agrees: latencies of successful requests only; ITL one sample per gap
between successive token-bearing chunks, pooled over requests, not weighted by the tokens a chunk
carries; TPOT (e2el - ttft) / (output_tokens - 1) for requests of more than one token; E2EL send to the
last token-bearing chunk; percentiles linear (numpy's default) and std the population's
(`metrics.distribution`), each percentile and the mean with its 95% interval (`metrics.uncertainty`). The
load, replay, sessions, throughput and A/B figures all read them here.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadproof.metrics.claims import Claim, number
from loadproof.metrics.conditioning import RunCount
from loadproof.metrics.distribution import PERCENTILES, STATS, Ranked, summarize
from loadproof.metrics.intervals import Interval
from loadproof.metrics.time_batches import fits, mean_in_time, percentile_in_time
from loadproof.metrics.uncertainty import CONFIDENCE, ranked, scaled, stat_interval
from loadproof.records import RequestRecord
from loadproof.units import NS_PER_S

LAG_STATS = ("p50", "p99", "max")


@dataclass(frozen=True)
class Latency:
    name: str  # the claim's middle part
    formula: str
    decimals: int
    stats: tuple[str, ...] = STATS


LATENCIES = (
    Latency("ttft_s", "t_first_token - t_send, successful requests", 4),
    Latency(
        "itl_s",
        "each gap between successive token-bearing chunks of a successful request, pooled over "
        "requests, one sample per gap (not weighted by the chunk's tokens; vLLM bench serve's ITL)",
        5,
    ),
    Latency("tpot_s", "(e2el - ttft) / (output_tokens - 1), successful requests of more than one token", 5),
    Latency("e2el_s", "t_last_token - t_send, successful requests", 4),
    Latency(
        "ttft_from_intended_s",
        "t_first_token - t_intended, successful requests: queueing in the client (the --max-concurrency cap) included",
        4,
    ),
    Latency("e2el_from_intended_s", "t_last_token - t_intended, successful requests", 4),
    Latency("send_lag_s", "t_send - t_intended, every request sent", 6),
    Latency(
        "client_lag_s", "t_dispatch - t_intended: how late the client released each request (its own lag)", 6, LAG_STATS
    ),
    Latency(
        "queue_wait_s", "t_send - t_dispatch: the wait for a --max-concurrency slot, and the event loop's", 6, LAG_STATS
    ),
)

# the client's own timing, not the deployment's: shown beside its figures, never a reason to reject a change in
# `compare` unless asked (`--judge-client`)
CLIENT_SIDE = ("send_lag_s", "client_lag_s", "queue_wait_s")


def client_side(name: str) -> bool:
    """Whether a claim (`load.send_lag_s.p99`) is one of the client's own diagnostics."""
    return any(part in CLIENT_SIDE for part in name.split("."))


# an embeddings answer is one body: its first token is its last, and it has no gaps or time per token
EMBEDDINGS_LATENCIES = ("e2el_s", "e2el_from_intended_s", "send_lag_s", "client_lag_s", "queue_wait_s")


def succeeded(record: RequestRecord) -> bool:
    return record.ok and record.first_token_ns is not None and record.last_token_ns is not None


def ttft_ns(record: RequestRecord) -> int:
    """t_first_token - t_send of a request `succeeded` holds for (so its first token is there)."""
    assert record.first_token_ns is not None, f"request {record.request_id} has no first token: it did not succeed"
    return record.first_token_ns - record.send_ns


def e2el_ns(record: RequestRecord) -> int:
    """t_last_token - t_send of a request `succeeded` holds for (so its last token is there)."""
    assert record.last_token_ns is not None, f"request {record.request_id} has no last token: it did not succeed"
    return record.last_token_ns - record.send_ns


def tpot_ns(record: RequestRecord) -> float | None:
    """(e2el - ttft) / (output_tokens - 1), for more than one token."""
    if (
        record.output_tokens is None
        or record.output_tokens < 2
        or record.first_token_ns is None
        or record.last_token_ns is None
    ):
        return None
    return (record.last_token_ns - record.first_token_ns) / (record.output_tokens - 1)


def samples_ns(records: list[RequestRecord]) -> dict[str, list[float]]:
    """Every latency's values in ns, by `Latency.name`."""
    ok = [r for r in records if succeeded(r)]
    planned = [r for r in records if r.intended_send_ns is not None]
    out: dict[str, list[float]] = {
        "ttft_s": [ttft_ns(r) for r in ok],
        "itl_s": [gap for r in ok for gap in r.itl_ns()],
        "tpot_s": [t for t in (tpot_ns(r) for r in ok) if t is not None],
        "e2el_s": [e2el_ns(r) for r in ok],
        "ttft_from_intended_s": [
            r.first_token_ns - r.intended_send_ns
            for r in ok
            if r.first_token_ns is not None and r.intended_send_ns is not None
        ],
        "e2el_from_intended_s": [
            r.last_token_ns - r.intended_send_ns
            for r in ok
            if r.last_token_ns is not None and r.intended_send_ns is not None
        ],
        "send_lag_s": [r.send_ns - r.intended_send_ns for r in planned if r.send_ns and r.intended_send_ns is not None],
        "client_lag_s": [
            r.dispatch_ns - r.intended_send_ns
            for r in planned
            if r.dispatch_ns is not None and r.intended_send_ns is not None
        ],
        "queue_wait_s": [r.send_ns - r.dispatch_ns for r in records if r.dispatch_ns is not None and r.send_ns],
    }
    return out


def gaps_by_latency(records: list[RequestRecord], gaps: list[float]) -> dict[str, list[float]]:
    """Each value's covariate beside `samples_ns`'s TTFT, ITL, TPOT and E2E values: its request's arrival gap
    (`gaps`, one a record, metrics/conditioning.py)."""
    ok = [(r, g) for r, g in zip(records, gaps, strict=True) if succeeded(r)]
    return {
        "ttft_s": [g for _, g in ok],
        "itl_s": [g for r, g in ok for _ in r.itl_ns()],
        "tpot_s": [g for r, g in ok if tpot_ns(r) is not None],
        "e2el_s": [g for _, g in ok],
    }


def itl_ends_ns(record: RequestRecord) -> list[int]:
    """When each of the record's ITL gaps (`RequestRecord.itl_ns`, in the same order) ended: its later chunk."""
    if record.first_token_ns is None:
        return []
    return [t for t in record.chunk_ns if t >= record.first_token_ns][1:]


def itl_in_time(
    records: list[RequestRecord], values: list[float], stat: str, ordered: Ranked, run: RunCount
) -> Interval | None:
    """ITL's `stat` interval in seconds, each gap batched by the second it ended (`time_batches`); none for the
    std, the min and the max."""
    times = [t for r in records if succeeded(r) for t in itl_ends_ns(r)]
    if stat in PERCENTILES:
        got = percentile_in_time(values, times, ordered, PERCENTILES[stat] / 100.0, run, CONFIDENCE)
    else:
        got = mean_in_time(values, times, run, CONFIDENCE) if stat == "mean" else None
    return scaled(got, 1 / NS_PER_S)


def latency_claims(
    records: list[RequestRecord],
    only: tuple[str, ...] | None = None,
    gaps: list[float] | None = None,
    run: RunCount | None = None,
) -> list[Claim]:
    """Each latency's statistics (`only`: those latencies by name, e.g. an embeddings run's); with `gaps` (each
    record's arrival gap, where a rescaled schedule fixed the count), TTFT's, ITL's, TPOT's and E2E's intervals
    conditioned on each batch's arrivals; with the `run`'s count too (`LoadPlan.ends_known`), ITL's batched by
    the second each gap ended and conditioned on each second's ends instead (`itl_in_time`), where the run is long
    enough for 4 batches of seconds (`time_batches.fits`)."""
    claims: list[Claim] = []
    values = samples_ns(records)
    covariates = {} if gaps is None else gaps_by_latency(records, gaps)
    for latency in LATENCIES:
        if only is not None and latency.name not in only:
            continue
        summary = summarize(values[latency.name])
        if summary is None:
            continue
        ordered = ranked(values[latency.name])
        for stat in latency.stats:
            what = {"mean": "mean", "std": "population standard deviation", "max": "max"}.get(
                stat, f"{PERCENTILES.get(stat, 0):g}th percentile"
            )
            claims.append(
                number(
                    f"load.{latency.name}.<stat>",
                    summary.stat(stat) / NS_PER_S,
                    "s",
                    f"{what} of {latency.formula} ({summary.method})",
                    latency.decimals,
                    direction="lower" if stat != "std" else "neither",
                    parts={"stat": stat},
                    interval=(
                        itl_in_time(records, values[latency.name], stat, ordered, run)
                        if run is not None and latency.name == "itl_s" and fits(run)
                        else stat_interval(
                            values[latency.name], stat, 1 / NS_PER_S, ordered, covariates.get(latency.name)
                        )
                    ),
                )
            )
    return claims


def span_s(records: list[RequestRecord]) -> float:
    """The first send to the last end of the records that were sent, in seconds (0: none sent): the duration of a
    closed-loop run's goodput (throughput, sessions, ab)."""
    sent = [r for r in records if r.send_ns]
    return (max(r.end_ns for r in sent) - min(r.send_ns for r in sent)) / NS_PER_S if sent else 0.0
