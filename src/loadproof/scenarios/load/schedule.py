"""The schedule of a load run: every request's intended send time, drawn before the first send, and the
plan that records how it was drawn (`plans.load.LoadPlan`, a stored contract: its fields keep their
meaning, and "all at once" is stored as it always was, `rate_rps` None with `all_at_once`).

`Planned` is one request of the schedule with its body built; the synthetic and the data-set workloads
(`load.synthetic`, `load.dataset`) fill them in, the sender (`load.sender`) sends them.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadproof.client import RequestSpec
from loadproof.errors import UsageError
from loadproof.plans.datasets import DatasetRef
from loadproof.plans.load import LoadLengths, LoadPlan, LoadStage
from loadproof.records import MediaCounts
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.long_context import HaystackTarget
from loadproof.scenarios.target import Target
from loadproof.workloads.arrivals import intended_offsets
from loadproof.workloads.synthetic import Lengths


@dataclass(slots=True)
class Planned:
    """One request of the schedule, built before the first send."""

    index: int
    offset_ns: int
    spec: RequestSpec
    input_tokens: int | None  # its text's tokens (None: a request of media alone, a transcription's)
    output_tokens: int
    model: str = ""  # --model-mix: the model its body asks for ("": the target's, not recorded)
    media: MediaCounts | None = None  # the media it carries, as its record keeps them


def schedule_offsets(opts: LoadOptions) -> list[float]:
    """Every request's intended send time, seconds after the schedule's start (`workloads.arrivals`)."""
    try:
        offsets = intended_offsets(opts.arrival_spec(), opts.seed)
    except ValueError as exc:
        raise UsageError(f"load schedule: {exc}") from None
    if not offsets:
        raise UsageError("the schedule drew no request before its end: raise --duration-s or the rate")
    return offsets


def lengths_of(spec: Lengths) -> LoadLengths:
    return LoadLengths(kind=spec.kind, a=spec.a, b=spec.b, text=str(spec))


def load_plan(
    opts: LoadOptions,
    offsets: list[float],
    target: Target,
    hs: HaystackTarget | None,
    max_model_len: int | None,
    *,
    input_tokens: LoadLengths,
    shared_prefix_tokens: int,
    clamped: int,
    dataset: DatasetRef | None = None,
) -> LoadPlan:
    """The plan of a run of `opts` on `target` whose schedule drew `offsets`, for the manifest; `hs`: the
    builder its prompts were sized with (None: a run of media alone sizes no text, and has no overhead)."""
    spec = opts.arrival_spec()
    return LoadPlan(
        arrival=opts.arrival,
        rate_rps=spec.constant_rps,
        all_at_once=spec.all_at_once,
        burstiness=opts.burstiness,
        ramp_up_s=opts.ramp_up_s,
        stages=[LoadStage(rate_rps=s.rate_rps, duration_s=s.duration_s) for s in opts.stages or ()],
        num_requests=opts.num_requests,
        duration_s=opts.duration_s,
        max_concurrency=opts.max_concurrency,
        seed=opts.seed,
        planned_requests=len(offsets),
        rescaled=spec.rescaled,
        schedule_span_s=round(offsets[-1], 9),
        input_tokens=input_tokens,
        output_tokens=lengths_of(opts.output_tokens),
        shared_prefix_tokens=shared_prefix_tokens,
        clamped_requests=clamped,
        ignore_eos=opts.ignore_eos,
        deadline_s=opts.deadline_s,
        slo=dict(opts.slo or {}),
        endpoint=target.endpoint,
        route=target.route.traits(),
        max_model_len=max_model_len,
        overhead_tokens=hs.builder.overhead_tokens if hs is not None else None,
        overhead_source=hs.overhead_source if hs is not None else None,
        haystack_additive=hs.builder.additive if hs is not None else None,
        dataset=dataset,
        inputs_per_request=opts.inputs_per_request if target.route.pooling else 1,
        until_precision=dict(opts.until_precision or {}),
        steady_window=True,  # metrics.steady_state: the steady window's claims
        arrivals_known=True,  # metrics.conditioning: the window ends at the last send; rescaled intervals conditioned
        ends_known=True,  # metrics.conditioning.RunCount: a whole run's rates conditioned on its ends, with the drain
    )


def describe(plan: LoadPlan) -> str:
    """The schedule in words, for the console: `poisson at 2 requests/s, ramp-up 5 s`, `all at once`."""
    if plan.all_at_once:
        return "all at once"
    shape = plan.arrival + (f" (burstiness {plan.burstiness:g})" if plan.arrival == "gamma" else "")
    ramp = f", ramp-up {plan.ramp_up_s:g} s" if plan.ramp_up_s else ""
    cap = f", at most {plan.max_concurrency} in flight" if plan.max_concurrency else ""
    return f"{shape} at {plan.rate_text} requests/s{ramp}{cap}"
