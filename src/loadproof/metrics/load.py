"""Open-loop load figures (docs/scenarios.md, "load"), as pure functions of a stored run and its plan.

Definitions follow vLLM's `bench serve` (0.32, `benchmarks/serve.py`, `calculate_metrics`) wherever it
has one, so a cross-measurement agrees: latencies of successful requests only; ITL one sample per gap
between successive token-bearing chunks, pooled over requests, not weighted by the tokens a chunk
carries; TPOT (e2el - ttft) / (output_tokens - 1) for requests of more than one token (0 for the SLO
check otherwise, as vLLM's goodput); E2EL send to the last token-bearing chunk; percentiles linear
(numpy's default) and std the population's (`metrics.distribution`); a request is good when it meets
every SLO (value <= target); goodput good requests / duration, where the duration runs from the
schedule's start to the end of the last response (vLLM: benchmark start to the last completion).
Failed, timed-out and cancelled requests are never good and never dropped from the count of all.

With a model mix (`--model-mix`), each model's or adapter's figures (`model_claims`) come from the records
that asked for it (`RequestRecord.model`): its share of the records, failures, TTFT and TPOT p50 and p99
over its successful requests, its output tokens / the run's duration, and with an SLO its good requests and
attainment over its records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadproof.metrics.adapter_churn import churn_claims
from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.constraints import constraint_claims
from loadproof.metrics.distribution import PERCENTILES, STATS, percentile, summarize
from loadproof.metrics.engine_agreement import ENGINE_SOURCES
from loadproof.metrics.figures import LinePlot, Panel, Series
from loadproof.metrics.reasoning import reasoning_claims
from loadproof.metrics.spec_decode import spec_claims, spec_gauge_claims, spec_window, unavailable_claims
from loadproof.plans.load import LoadPlan
from loadproof.records import POOLING, RequestRecord
from loadproof.rundir import EngineSample, Event
from loadproof.units import NS_PER_S

SCENARIO = "load"
LAG_STATS = ("p50", "p99", "max")

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

# an embeddings answer is one body: its first token is its last, and it has no gaps or time per token
EMBEDDINGS_LATENCIES = ("e2el_s", "e2el_from_intended_s", "send_lag_s", "client_lag_s", "queue_wait_s")


def load_records(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.scenario == SCENARIO]


def schedule_start_ns(records: list[RequestRecord], events: list[Event]) -> int | None:
    """The schedule's start: its `schedule_start` event (the earliest, with several workers), else the
    earliest intended send, else the earliest send."""
    starts = [e.t_ns for e in events if e.kind == "schedule_start" and e.t_ns is not None]
    if starts:
        return min(starts)
    intended = [r.intended_send_ns for r in records if r.intended_send_ns is not None]
    if intended:
        return min(intended)
    sent = [r.send_ns for r in records if r.send_ns]
    return min(sent) if sent else None


def succeeded(record: RequestRecord) -> bool:
    return record.ok and record.first_token_ns is not None and record.last_token_ns is not None


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
        "ttft_s": [r.first_token_ns - r.send_ns for r in ok],  # type: ignore[operator]
        "itl_s": [gap for r in ok for gap in r.itl_ns()],
        "tpot_s": [t for t in (tpot_ns(r) for r in ok) if t is not None],
        "e2el_s": [r.last_token_ns - r.send_ns for r in ok],  # type: ignore[operator]
        "ttft_from_intended_s": [
            r.first_token_ns - r.intended_send_ns
            for r in ok  # type: ignore[operator]
            if r.intended_send_ns is not None
        ],
        "e2el_from_intended_s": [
            r.last_token_ns - r.intended_send_ns
            for r in ok  # type: ignore[operator]
            if r.intended_send_ns is not None
        ],
        "send_lag_s": [r.send_ns - r.intended_send_ns for r in planned if r.send_ns],  # type: ignore[operator]
        "client_lag_s": [
            r.dispatch_ns - r.intended_send_ns
            for r in planned  # type: ignore[operator]
            if r.dispatch_ns is not None
        ],
        "queue_wait_s": [r.send_ns - r.dispatch_ns for r in records if r.dispatch_ns is not None and r.send_ns],
    }
    return out


def slo_values(record: RequestRecord) -> dict[str, float] | None:
    """The request's value of every SLO in seconds; None for a request that did not succeed."""
    if not succeeded(record):
        return None
    gaps = sorted(record.itl_ns())
    values = {
        "ttft": record.first_token_ns - record.send_ns,  # type: ignore[operator]
        "tpot": tpot_ns(record) or 0.0,
        "itl": gaps[-1] if gaps else 0.0,
        "itl_p99": percentile(gaps, 99.0) if gaps else 0.0,
        "e2el": record.last_token_ns - record.send_ns,  # type: ignore[operator]
    }
    if record.intended_send_ns is not None:
        values["ttft_from_intended"] = record.first_token_ns - record.intended_send_ns  # type: ignore[operator]
        values["e2el_from_intended"] = record.last_token_ns - record.intended_send_ns  # type: ignore[operator]
    return {k: v / NS_PER_S for k, v in values.items()}


def meets(values: dict[str, float] | None, slo: dict[str, float], only: str | None = None) -> bool:
    """Whether a request's values meet every SLO (or just `only`): value <= target; never when it failed."""
    if values is None:
        return False
    keys = [only] if only is not None else list(slo)
    return all(k in values and values[k] <= slo[k] for k in keys)


def slo_text(slo: dict[str, float]) -> str:
    return ", ".join(f"{k} <= {v * 1000:g} ms" if v < 1 else f"{k} <= {v:g} s" for k, v in slo.items())


def claims_of_run(run: Any, plan: LoadPlan) -> list[Claim]:
    records = load_records(run.records)
    start = schedule_start_ns(records, run.events)
    drafts = spec_window(run.samples, start, max(r.end_ns for r in records)) if records and start is not None else None
    spec = (
        spec_claims(
            "load",
            {},
            drafts,
            "the schedule's start to the last response's end",
            sum(r.first_token_ns is not None for r in records),
        )
        if drafts is not None or not records
        else spec_gauge_claims("load", {}, run.samples, max(r.end_ns for r in records))
    )
    return (
        load_claims(records, plan, run.events, run.samples)
        + spec
        + unavailable_claims(run, spec)
        + churn_claims(records, run.manifest.profile)  # --model-mix against a profile with [lora]
        + constraint_claims("load", records, run.manifest.options)
    )


def load_claims(
    records: list[RequestRecord], plan: LoadPlan, events: list[Event], samples: list[EngineSample]
) -> list[Claim]:
    failed = sum(not succeeded(r) for r in records)
    claims = [
        count(
            "load.planned_requests",
            plan.planned_requests,
            "requests",
            "requests the schedule drew",
            direction="neither",
        ),
        count(
            "load.requests",
            len(records),
            "requests",
            "records of the run: every request sent, whatever its end",
            direction="neither",
        ),
        count(
            "load.failed_requests",
            failed,
            "requests",
            "records that failed, timed out or were cancelled, or got no token",
            direction="lower",
        ),
        fact(
            "load.schedule_completed",
            len(records) == plan.planned_requests,
            "every planned request was sent (no: the run was interrupted; see the schedule_end event)",
        ),
    ]
    t0 = schedule_start_ns(records, events)
    if not records or t0 is None:
        return claims
    end_ns = max(r.end_ns for r in records)
    duration_s = (end_ns - t0) / NS_PER_S
    ok = [r for r in records if succeeded(r)]
    claims.append(
        number(
            "load.duration_s",
            duration_s,
            "s",
            "end of the last response - the schedule's start",
            3,
            direction="neither",
        )
    )
    sent = [r for r in records if r.send_ns]
    intended = [r.intended_send_ns for r in sent if r.intended_send_ns is not None]
    if intended and max(intended) > t0:
        claims.append(
            number(
                "load.offered_rate_rps",
                len(intended) / ((max(intended) - t0) / NS_PER_S),
                "requests/s",
                "requests sent / (last intended send - the schedule's start): the rate the schedule asked for",
                3,
                direction="neither",
            )
        )
    if sent and max(r.send_ns for r in sent) > t0:
        claims.append(
            number(
                "load.achieved_rate_rps",
                len(sent) / ((max(r.send_ns for r in sent) - t0) / NS_PER_S),
                "requests/s",
                "requests sent / (last actual send - the schedule's start)",
                3,
                direction="higher",
            )
        )
    if duration_s > 0:
        claims.append(
            number(
                "load.request_throughput_rps",
                len(ok) / duration_s,
                "requests/s",
                "successful requests / duration",
                3,
                direction="higher",
            )
        )
    if plan.endpoint in POOLING:  # an embeddings or rerank run: no output tokens, no time per token
        return (
            claims
            + length_claims(ok, plan)
            + latency_claims(records, EMBEDDINGS_LATENCIES)
            + pooling_claims(ok, duration_s, plan.endpoint)
            + slo_claims(records, plan.slo, duration_s)
            + model_claims(records, plan.model_mix, plan.slo, duration_s)
            + client_limited_claims(records, plan)
            + engine_claims(samples, t0, end_ns)
        )
    if duration_s > 0:
        claims.append(
            number(
                "load.output_tokens_per_s",
                sum(r.output_tokens or 0 for r in ok) / duration_s,
                "tokens/s",
                "sum of usage.completion_tokens of successful requests / duration; all streams together",
                1,
                direction="higher",
            )
        )
    claims += length_claims(ok, plan)
    claims += latency_claims(records)
    claims += slo_claims(records, plan.slo, duration_s)
    claims += model_claims(records, getattr(plan, "model_mix", []), plan.slo, duration_s)  # --model-mix
    claims += client_limited_claims(records, plan)
    claims += reasoning_claims("load", records)
    claims += engine_claims(samples, t0, end_ns)
    return claims


def length_claims(ok: list[RequestRecord], plan: LoadPlan) -> list[Claim]:
    inputs = [r for r in ok if r.planned_input_tokens is not None]
    claims = (
        [
            count(
                "load.input_tokens_mismatched",
                sum(r.prompt_tokens != r.planned_input_tokens for r in inputs),
                "requests",
                "successful requests whose usage.prompt_tokens differs from the length built",
                direction="lower",
            )
        ]
        if inputs
        else []
    )
    outputs = [r for r in ok if r.planned_output_tokens is not None]
    if outputs and plan.ignore_eos and plan.endpoint not in POOLING:
        claims.append(
            count(
                "load.output_tokens_mismatched",
                sum(r.output_tokens != r.planned_output_tokens for r in outputs),
                "requests",
                "successful requests whose usage.completion_tokens differs from max_tokens (ignore_eos)",
                direction="lower",
            )
        )
    return claims


def pooling_claims(ok: list[RequestRecord], duration_s: float, endpoint: str = "embeddings") -> list[Claim]:
    """An embeddings run's rates: input tokens and vectors per second, and vectors per request; a rerank run's
    the same with the documents scored."""
    if not ok or duration_s <= 0:
        return []
    items = [r.vectors or 0 for r in ok]
    claims = [
        number(
            "load.input_tokens_per_s",
            sum(r.prompt_tokens or 0 for r in ok) / duration_s,
            "tokens/s",
            "sum of usage.prompt_tokens of successful requests / duration",
            1,
            direction="higher",
        )
    ]
    if endpoint == "rerank":
        return claims + [
            number(
                "load.rerank.documents_per_s",
                sum(items) / duration_s,
                "documents/s",
                "documents scored (results returned) by successful requests / duration",
                2,
                direction="higher",
            ),
            number(
                "load.rerank.documents_per_request",
                sum(items) / len(ok),
                "documents",
                "documents scored / successful requests (the documents each query was ranked against)",
                2,
                direction="neither",
            ),
        ]
    return claims + [
        number(
            "load.embeddings.vectors_per_s",
            sum(items) / duration_s,
            "vectors/s",
            "vectors returned by successful requests / duration",
            2,
            direction="higher",
        ),
        number(
            "load.embeddings.vectors_per_request",
            sum(items) / len(ok),
            "vectors",
            "vectors returned / successful requests (the batch each request embedded)",
            2,
            direction="neither",
        ),
    ]


def latency_claims(records: list[RequestRecord], only: tuple[str, ...] | None = None) -> list[Claim]:
    """Each latency's statistics (`only`: those latencies by name, e.g. an embeddings run's)."""
    claims: list[Claim] = []
    values = samples_ns(records)
    for latency in LATENCIES:
        if only is not None and latency.name not in only:
            continue
        summary = summarize(values[latency.name])
        if summary is None:
            continue
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
                )
            )
    return claims


def span_s(records: list[RequestRecord]) -> float:
    """The first send to the last end of the records that were sent, in seconds (0: none sent): the duration of a
    closed-loop run's goodput (throughput, sessions, ab)."""
    sent = [r for r in records if r.send_ns]
    return (max(r.end_ns for r in sent) - min(r.send_ns for r in sent)) / NS_PER_S if sent else 0.0


def slo_claims(
    records: list[RequestRecord], slo: dict[str, float], duration_s: float, scenario: str = "load"
) -> list[Claim]:
    """`<scenario>.slo`, good requests, attainment, goodput and each SLO's share (runs with `--slo`: load and
    replay, and throughput, sessions and ab, whose good tokens the energy and cost claims count)."""
    if not slo or not records:
        return []
    values = [slo_values(r) for r in records]
    good = sum(meets(v, slo) for v in values)
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
        ),
    ]
    if duration_s > 0:
        claims.insert(
            2,
            number(
                f"{scenario}.goodput_rps",
                good / duration_s,
                "requests/s",
                "good requests / duration",
                3,
                direction="higher",
            ),
        )
    for key in slo:
        met = sum(meets(v, slo, only=key) for v in values)
        claims.append(
            number(
                f"{scenario}.slo.<slo>.met_pct",
                100 * met / len(records),
                "%",
                f"requests meeting {key} <= target ({SLO_DEFINITIONS.get(key, key)}) / every request sent x 100",
                2,
                direction="higher",
                parts={"slo": key},
            )
        )
    return claims


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
            ("ttft_s", [(r.first_token_ns - r.send_ns) / NS_PER_S for r in ok]),  # type: ignore[operator]
            ("tpot_s", [t / NS_PER_S for t in map(tpot_ns, ok) if t is not None]),
        ):
            summary = summarize(values)
            for stat in MODEL_STATS if summary is not None else ():
                claims.append(
                    number(
                        f"{pre}.{name}.<stat>",
                        summary.stat(stat),
                        "s",  # type: ignore[union-attr]
                        f"{stat} of {'t_first_token - t_send' if name == 'ttft_s' else 'TPOT'} over this "
                        f"model's successful requests ({summary.method})",
                        4,
                        direction="lower",  # type: ignore[union-attr]
                        parts={**parts, "stat": stat},
                    )
                )
        if duration_s > 0:
            claims.append(
                number(
                    f"{pre}.output_tokens_per_s",
                    sum(r.output_tokens or 0 for r in ok) / duration_s,
                    "tokens/s",
                    "sum of usage.completion_tokens of this model's successful requests / the run's duration",
                    1,
                    direction="higher",
                    parts=parts,
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
                ),
            ]
    return claims


def client_limited_claims(records: list[RequestRecord], plan: LoadPlan) -> list[Claim]:
    lags = [
        (r.intended_send_ns, r.dispatch_ns - r.intended_send_ns)
        for r in records
        if r.intended_send_ns is not None and r.dispatch_ns is not None
    ]
    if not lags:
        return []
    lags.sort(key=lambda pair: pair[0])
    tenth = max(1, len(lags) // 10)
    first = percentile(sorted(lag for _, lag in lags[:tenth]), 50) / NS_PER_S
    last = percentile(sorted(lag for _, lag in lags[-tenth:]), 50) / NS_PER_S
    limited = last - first > plan.client_lag_growth_s and last > plan.client_lag_floor_s
    return [
        fact(
            "load.client_limited",
            limited,
            f"median client lag (t_dispatch - t_intended) of the schedule's first tenth {first * 1000:.3f} ms, "
            f"of its last tenth {last * 1000:.3f} ms; yes when the last exceeds the first by more than "
            f"{plan.client_lag_growth_s * 1000:g} ms and is above {plan.client_lag_floor_s * 1000:g} ms: the "
            "client, not the server, could not keep the schedule",
        )
    ]


def engine_claims(samples: list[EngineSample], t0: int, end_ns: int) -> list[Claim]:
    """The engine's queue, batch, preemptions and KV cache while the schedule ran, from its /metrics."""
    ordered = sorted(samples, key=lambda s: s.t_ns)
    during = [s.values for s in ordered if t0 <= s.t_ns <= end_ns]
    claims: list[Claim] = []
    for key, name, what, unit, direction in (
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
    ):
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
            )  # type: ignore[arg-type]
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


def reported_hit_pct(records: list[RequestRecord]) -> float | None:
    """The engine's per-request prefix-cache hits (usage.prompt_tokens_details.cached_tokens, which vLLM
    reports with --enable-prompt-tokens-details) over the prompt tokens of the requests reporting them, %."""
    rows = [r for r in records if r.cached_tokens is not None and r.prompt_tokens]
    if not rows:
        return None
    return 100 * sum(r.cached_tokens for r in rows) / sum(r.prompt_tokens for r in rows)  # type: ignore[misc]


# --- report panels (catalog entry `figures`) ---------------------------------------------------------


def figures(run: Any, plan: LoadPlan, claims: list[Claim]) -> list[Panel]:
    """Where the engine drafts: its acceptance over the run, one point per pair of consecutive /metrics
    samples (metrics.spec_decode's window between them), against the seconds since the schedule's start."""
    records = load_records(run.records)
    start = schedule_start_ns(records, run.events)
    if not records or start is None:
        return []
    end = max(r.end_ns for r in records)
    held = sorted(
        (
            s
            for s in run.samples
            if s.source in ENGINE_SOURCES and s.t_ns >= start - 60 * NS_PER_S and s.t_ns <= end + 60 * NS_PER_S
        ),
        key=lambda s: s.t_ns,
    )
    points = []
    for a, b in zip(held, held[1:]):
        window = spec_window([a, b], a.t_ns, b.t_ns)
        if window is not None and window.draft_tokens > 0 and start <= b.t_ns:
            points.append(((b.t_ns - start) / NS_PER_S, 100 * window.accepted / window.draft_tokens))
    if len(points) < 2:
        return []
    return [
        LinePlot(
            title="Draft acceptance over the run",
            x_label="seconds since the schedule's start",
            y_label="accepted / draft tokens, %",
            series=[Series("acceptance", points)],
            y_from_zero=True,
            dots=True,
            caption="Each point: the engine's draft counters' growth between two consecutive "
            '/metrics samples (docs/scenarios.md, "Speculative decoding"); the run\'s figure is '
            "load.spec_decode.acceptance_pct.",
        )
    ]
