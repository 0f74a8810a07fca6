"""The load plan: the arrival schedule's parameters, the workload's lengths, the SLOs and the bounds the
claims use, so every claim of an open-loop run is recomputed from its directory alone.

Each request's intended send time is stored in its record (`intended_send_ns`), with the lengths it was
built to (`planned_input_tokens`, `planned_output_tokens`); the schedule's start is the `schedule_start`
event; how far the schedule got is the `schedule_end` event (and the manifest's `schedule`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from loadproof.plans import Plan
from loadproof.plans.datasets import DatasetRef
from loadproof.protocol.routes import ROUTES, route_of
from loadproof.protocol.routes.base import RouteTraits


class LoadStage(msgspec.Struct, kw_only=True):
    rate_rps: float
    duration_s: float


class LoadLengths(msgspec.Struct, kw_only=True):
    """A token length: `kind` fixed (a), uniform (a..b), normal (mean a, std b), lognormal (median a, sigma b);
    `text` as it is written on the command line."""

    kind: str
    a: float
    b: float = 0.0
    text: str = ""


class MixedModel(msgspec.Struct, kw_only=True):
    """One model of a `--model-mix`, with its relative weight."""

    model: str
    weight: float


class MediaPlan(msgspec.Struct, kw_only=True):
    """What a multimodal run's requests carried besides text (each request's counts are in its record):
    `--images`, `--audio-s`, `--video-frames` and `--media-reuse` as given (empty for a data set's own media,
    `source` "dataset"), and `--media-tokens`, the rules each record's `media_tokens` was figured by (given, or a
    profile's `[model] image_tokens`/`audio_tokens`: `tokens_source`)."""

    source: str = "synthetic"  # or "dataset"
    images: str = ""
    audio_s: float | None = None
    video_frames: str = ""
    reuse: float = 0.0
    tokens: str = ""
    # where `tokens` came from: "--media-tokens", a profile's `[model]` ("profile embedded-vlm [model]
    # image_tokens"), both comma-separated; "": no rule, or a run from before it was kept
    tokens_source: str = ""
    media_alone: bool = False  # the route sends the media without text (a transcription)

    def key(self) -> dict[str, Any]:
        """The workload's media (where the rules came from is no part of it)."""
        return {
            k: v
            for k, v in msgspec.structs.asdict(self).items()
            if (v not in ("", None, 0.0, False) or k == "source") and k != "tokens_source"
        }


def route_traits(endpoint: str | None, kept: RouteTraits | None) -> RouteTraits:
    """A plan's route, as it kept it; a run from before routes were kept named a route every loadproof knows
    (completions when it named none)."""
    if kept is not None:
        return kept
    name = endpoint or "completions"
    return route_of(name).traits() if name in ROUTES else RouteTraits(name=name)


class LoadPlan(Plan, kw_only=True):
    arrival: str  # poisson | constant | gamma
    rate_rps: float | None = None  # None: stages, or all at once
    all_at_once: bool = False  # --rate inf
    burstiness: float = 1.0  # gamma's shape
    ramp_up_s: float = 0.0
    stages: list[LoadStage] = []
    num_requests: int | None = None  # the bounds as given
    duration_s: float | None = None
    max_concurrency: int | None = None
    seed: int
    planned_requests: int  # what the schedule drew
    rescaled: bool = False  # a constant rate: the offsets rescaled so the last is planned_requests / rate (vLLM's)
    schedule_span_s: float  # the last intended send, seconds after the start
    input_tokens: LoadLengths
    output_tokens: LoadLengths
    shared_prefix_tokens: int = 0
    clamped_requests: int = 0  # requests whose drawn lengths were raised to the shortest prompt or cut to the context
    ignore_eos: bool = True
    deadline_s: float | None = None
    slo: dict[str, float] = {}  # per-request SLOs in seconds, by name (ttft, tpot, itl, itl_p99, e2el, ...)
    # client-limited: the median dispatch lag of the schedule's last tenth exceeds the first tenth's by more
    # than `client_lag_growth_s` and is above `client_lag_floor_s`
    client_lag_growth_s: float = 0.025
    client_lag_floor_s: float = 0.05
    endpoint: str | None = None
    route: RouteTraits | None = None  # what the claims need of the endpoint's route (None: a run before it was kept)
    max_model_len: int | None = None
    overhead_tokens: int | None = None
    overhead_source: str | None = None
    haystack_additive: bool | None = None
    dataset: DatasetRef | None = None  # --dataset: the user's data set instead of synthetic prompts
    model_mix: list[MixedModel] = []  # --model-mix: each model's weight; each request's model is in its record
    base_model: str | None = None  # with --model-mix: the model /v1/models listed first, adapters' TTFT's reference
    inputs_per_request: int = 1  # embeddings: the inputs (vectors) each request asks for; rerank: its documents
    media: MediaPlan | None = None  # --images, --audio-s, --video-frames or a data set's media
    # --until-precision: the 95% interval's relative half-width asked of each figure, in percent, by name
    until_precision: dict[str, float] = {}
    # the steady window's claims (metrics.steady_state: MSER-5 leaves out the warm-up and the drain), which every
    # run sets since; False: a run made before them, whose published claims have none
    steady_window: bool = False
    # the claims read the run's sends (metrics.conditioning): the steady window ends at the last send, and a rescaled
    # schedule's intervals are conditioned on each batch's arrivals; every run sets it since; False: a run made
    # before, whose published claims have the window MSER-5 cut at both ends and the unconditioned intervals
    arrivals_known: bool = False
    # a whole run's rates under a fixed count are conditioned on each second's ends and carry the drain's spread
    # (metrics.conditioning.RunCount); every run sets it since; False: a run made before, whose published rates
    # were conditioned on the sends
    ends_known: bool = False

    def traits(self) -> RouteTraits:
        return route_traits(self.endpoint, self.route)

    @property
    def rate_text(self) -> str:
        if self.all_at_once:
            return "inf"
        if self.stages:
            return ",".join(f"{s.rate_rps:g}:{s.duration_s:g}" for s in self.stages)
        return f"{self.rate_rps:g}"

    def workload(self) -> dict[str, Any]:
        return {
            "rate": self.rate_text,
            "arrival": self.arrival,
            "burstiness": self.burstiness,
            "ramp_up_s": self.ramp_up_s,
            "max_concurrency": self.max_concurrency,
            "num_requests": self.num_requests,
            "duration_s": self.duration_s,
            "input_tokens": self.input_tokens.text,
            "output_tokens": self.output_tokens.text,
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "ignore_eos": self.ignore_eos,
            **({"dataset": self.dataset.key()} if self.dataset is not None else {}),
            **({"model_mix": {m.model: m.weight for m in self.model_mix}} if self.model_mix else {}),
            **({"media": self.media.key()} if self.media is not None else {}),
            **({"inputs_per_request": self.inputs_per_request} if self.traits().pooling else {}),
        }
