"""Open-loop load figures (docs/scenarios.md, "load"), as pure functions of a stored run and its plan.

Each request's latencies are `metrics.latency`'s (vLLM `bench serve`'s definitions), its SLOs, goodput and
attainment `metrics.slo`'s, a model mix's figures `metrics.model_mix`'s and the engine's state over the
schedule `metrics.engine_state`'s; this module puts them together for a run: requests planned, sent and
failed, the rates offered, achieved and completed, token throughput, lengths against the plan, an
embeddings or rerank run's rates, and whether the client kept its schedule. Goodput's duration runs from the
schedule's start to the end of the last response (vLLM: benchmark start to the last completion). Failed,
timed-out and cancelled requests are never good and never dropped from the count of all.
"""

from __future__ import annotations

from typing import Any

from loadproof.metrics.adapter_churn import churn_claims
from loadproof.metrics.adapter_wait import wait_claims
from loadproof.metrics.claims import Claim, count, fact, number
from loadproof.metrics.conditioning import RunCount, arrival_gaps, fixed_count, run_count, sends_ns
from loadproof.metrics.constraints import constraint_claims
from loadproof.metrics.distribution import percentile
from loadproof.metrics.engine_agreement import ENGINE_SOURCES
from loadproof.metrics.engine_state import engine_claims
from loadproof.metrics.figures import LinePlot, Panel, Series, headline
from loadproof.metrics.latency import EMBEDDINGS_LATENCIES, latency_claims, succeeded
from loadproof.metrics.latency_figures import distribution_panels
from loadproof.metrics.media import media_claims
from loadproof.metrics.model_mix import model_claims
from loadproof.metrics.precision import precision_claims
from loadproof.metrics.reasoning import reasoning_claims
from loadproof.metrics.slo import slo_claims, slo_text
from loadproof.metrics.spec_decode import spec_claims, spec_gauge_claims, spec_window, unavailable_claims
from loadproof.metrics.steady_state import open_loop_claims, steady_spans
from loadproof.metrics.timeline import engine_panels, latency_panels, rate_panel
from loadproof.metrics.uncertainty import rate_interval
from loadproof.plans.load import LoadPlan
from loadproof.plans.replay import ReplayPlan
from loadproof.protocol.routes.base import RouteTraits
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample, Event
from loadproof.units import NS_PER_S

SCENARIO = "load"
# what a prediction of a load run shows (predict/load.py: `sim predict-load`, `plan --simulate load|replay`),
# and CONTRACT, the figures its prediction contract compares (the catalog entry's `contract`)
PREDICTED_LATENCIES = (
    "load.ttft_s.p50",
    "load.ttft_s.p99",
    "load.tpot_s.p50",
    "load.tpot_s.p99",
    "load.itl_s.p99",
    "load.e2el_s.p50",
)
PREDICTED_RATES = ("load.output_tokens_per_s", "load.goodput_rps", "load.slo_attainment_pct")
CONTRACT = ("load.ttft_s.p50", "load.ttft_s.p99", "load.tpot_s.p50", "load.e2el_s.p50", "load.output_tokens_per_s")

# the plans whose runs get the load figures: a replay's carries every field they read (planned_requests, endpoint,
# slo, model_mix, ignore_eos and the client-lag bounds), with the same types
LoadLike = LoadPlan | ReplayPlan


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
        + wait_claims(records, [m.model for m in plan.model_mix], plan.base_model, run.samples)  # waiting for a slot
        + constraint_claims("load", records, run.manifest.options)
        + (open_loop_steady(records, start, plan) if plan.steady_window else [])
        + precision_claims(records, plan.until_precision, plan.slo, run.events, start)  # --until-precision
    )


def open_loop_steady(records: list[RequestRecord], start: int | None, plan: LoadPlan) -> list[Claim]:
    """The steady window's claims: a run that records its sends (`arrivals_known`) ends the window at its last
    send, and conditions its intervals where a rescaled schedule fixed the count (metrics/conditioning.py)."""
    last = plan.arrivals_known
    fixed = fixed_count(plan, records)
    return open_loop_claims(records, start, plan.traits().pooling, SCENARIO, last_send=last, conditioned=fixed)


def load_claims(
    records: list[RequestRecord], plan: LoadLike, events: list[Event], samples: list[EngineSample]
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
    # a rescaled schedule sent whole fixed the count: intervals conditioned on each batch's arrivals
    gaps = arrival_gaps(records, t0) if fixed_count(plan, records) else None
    sends = None if gaps is None else sends_ns(records)
    run = run_count(plan, records, t0)  # a whole run's rates and ITL: conditioned on its ends (ends_known)
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
                interval=rate_interval(
                    [r.end_ns for r in ok], [1.0] * len(ok), t0, duration_s, len(ok) / duration_s, sends, run
                ),
            )
        )
    route = plan.traits()
    if route.pooling:  # an embeddings or rerank run: no output tokens, no time per token
        return (
            claims
            + length_claims(ok, plan)
            + latency_claims(records, EMBEDDINGS_LATENCIES, gaps, run)
            + pooling_claims(ok, duration_s, route, t0, sends, run)
            + slo_claims(records, plan.slo, duration_s, gaps=gaps, run=run)
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
                interval=rate_interval(
                    [r.end_ns for r in ok],
                    [float(r.output_tokens or 0) for r in ok],
                    t0,
                    duration_s,
                    sum(r.output_tokens or 0 for r in ok) / duration_s,
                    sends,
                    run,
                ),
            )
        )
    claims += length_claims(ok, plan)
    claims += latency_claims(records, gaps=gaps, run=run)
    claims += slo_claims(records, plan.slo, duration_s, gaps=gaps, run=run)
    claims += model_claims(records, getattr(plan, "model_mix", []), plan.slo, duration_s)  # --model-mix
    claims += client_limited_claims(records, plan)
    claims += reasoning_claims("load", records)
    claims += media_claims(records, getattr(plan, "media", None), duration_s, samples, t0, end_ns)  # multimodal
    claims += engine_claims(samples, t0, end_ns)
    return claims


def length_claims(ok: list[RequestRecord], plan: LoadLike) -> list[Claim]:
    # a request with media: its prompt holds their tokens too (load.media.prompt_tokens_mismatched compares them)
    inputs = [r for r in ok if r.planned_input_tokens is not None and not r.media_hashes]
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
    route = plan.traits()
    if outputs and plan.ignore_eos and route.streams and route.forces_length:
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


def pooling_claims(
    ok: list[RequestRecord],
    duration_s: float,
    route: RouteTraits,
    t0: int,
    sends: list[int] | None = None,
    run: RunCount | None = None,
) -> list[Claim]:
    """A pooling run's rates (each with its interval from `t0`, the schedule's start; given every request's
    `sends`, conditioned on each batch's arrivals; given the `run`'s count, on its ends): input tokens and the answer's items per second, and items
    per request (an embeddings run's vectors, a rerank run's documents scored: the route's `items`; the plan's,
    so no interval)."""
    if not ok or duration_s <= 0 or route.items is None:
        return []
    what = route.items
    items = [r.vectors or 0 for r in ok]
    ends, inputs = [r.end_ns for r in ok], [float(r.prompt_tokens or 0) for r in ok]
    claims = [
        number(
            "load.input_tokens_per_s",
            sum(r.prompt_tokens or 0 for r in ok) / duration_s,
            "tokens/s",
            "sum of usage.prompt_tokens of successful requests / duration",
            1,
            direction="higher",
            interval=rate_interval(ends, inputs, t0, duration_s, sum(inputs) / duration_s, sends, run),
        )
    ]
    return claims + [
        number(
            f"load.{what.claim}.{what.unit}_per_s",
            sum(items) / duration_s,
            f"{what.unit}/s",
            what.per_s_formula,
            2,
            direction="higher",
            interval=rate_interval(
                ends, [float(i) for i in items], t0, duration_s, sum(items) / duration_s, sends, run
            ),
        ),
        number(
            f"load.{what.claim}.{what.unit}_per_request",
            sum(items) / len(ok),
            what.unit,
            what.per_request_formula,
            2,
            direction="neither",
        ),
    ]


def client_limited_claims(records: list[RequestRecord], plan: LoadLike) -> list[Claim]:
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


# --- report panels (catalog entry `figures`) ---------------------------------------------------------


HEADLINE = (
    ("requests/s sent", "load.achieved_rate_rps"),
    ("requests/s completed", "load.request_throughput_rps"),
    ("output tokens/s", "load.output_tokens_per_s"),
    ("output tokens/s, steady window", "load.steady.output_tokens_per_s"),
    ("TTFT p50", "load.ttft_s.p50"),
    ("TTFT p99", "load.ttft_s.p99"),
    ("ITL p99", "load.itl_s.p99"),
    ("E2E latency p50", "load.e2el_s.p50"),
    ("SLO met", "load.slo_attainment_pct"),
    ("goodput, requests/s", "load.goodput_rps"),
    ("vectors/s", "load.embeddings.vectors_per_s"),
    ("documents/s", "load.rerank.documents_per_s"),
    ("failed requests", "load.failed_requests"),
)


def figures(run: Any, plan: LoadPlan, claims: list[Claim]) -> list[Panel]:
    """The headline figures; the schedule over time (requests asked, sent and completed per second), TTFT and
    ITL over the run, the engine's running, waiting and KV cache use from its /metrics; the TTFT, ITL and E2E
    distributions; where the engine drafts, its acceptance over the run (report.html)."""
    return open_loop_panels(load_records(run.records), run.events, run.samples, claims, plan.slo)


def open_loop_panels(
    records: list[RequestRecord],
    events: list[Event],
    samples: list[EngineSample],
    claims: list[Claim],
    slo: dict[str, float],
    prefix: str = SCENARIO,
) -> list[Panel]:
    """An open-loop run's panels (a load run's; a replay's, whose claims are named `prefix`.*): the headline,
    the schedule over time, TTFT and ITL over the run, the engine's state, the distributions, the drafts."""
    start = schedule_start_ns(records, events)
    if not records or start is None:
        return []
    end = max(r.end_ns for r in records)
    shown = [(label, prefix + name[len(SCENARIO) :]) for label, name in HEADLINE]
    return (
        headline(claims, shown, slo_note(slo))
        + rate_panel(records, start, end, prefix, steady_spans(claims, prefix))
        + latency_panels(records, start)
        + engine_panels(samples, start, end)
        + distribution_panels(records, prefix)
        + acceptance_panel(samples, start, end)
    )


def slo_note(slo: dict[str, float]) -> str:
    """The SLO the run was judged on, in words ("" without one)."""
    return f"SLO: {slo_text(slo)}" if slo else ""


def acceptance_panel(samples: list[EngineSample], start: int, end: int) -> list[Panel]:
    """Where the engine drafts: its acceptance over the run, one point per pair of consecutive /metrics
    samples (metrics.spec_decode's window between them), against the seconds since the schedule's start."""
    held = sorted(
        (
            s
            for s in samples
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
            key="draft-acceptance",
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
