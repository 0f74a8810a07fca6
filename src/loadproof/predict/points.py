"""What `loadproof sim calibrate` fits to: its points, read from measured runs or given by hand.

Run directories give cold TTFTs (`TtftPoint`), decode rates (`DecodePoint`: per request, by concurrency and
prompt length; a capacity window as N streams), the part of a TTFT that overlaps with other requests'
prefills (`FrontendPoint`), and the engine's facts from the runs' manifests (`ProfileFacts`: limits, KV size,
pipeline stages, CUDA-graph limit). Which points a run gives is its scenario's to say: the catalog entry's
`calibrate` (`calibration_points(run) -> RunPoints`, in predict/NAME.py: prefill, throughput and capacity
runs); `request_points` is what a run of single requests gives. `--ttft L:SECONDS` and `--decode
BATCH:CONTEXT:TOKENS_PER_S` give points by hand. The fit itself is `predict.calibrate`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from loadproof.catalog import column
from loadproof.errors import UsageError
from loadproof.predict.base import listing
from loadproof.registry import Registry
from loadproof.store.run_dir import Run, load_run
from loadproof.units import NS_PER_S


class _ModelFacts(msgspec.Struct):
    max_model_len: int | None = None


class _SchedulerFacts(msgspec.Struct):
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None


class _KVFacts(msgspec.Struct):
    block_size: int | None = None
    budget_gib_per_gpu: float | None = None


class _ParallelFacts(msgspec.Struct):
    pipeline: int | None = None


class _CudaGraphFacts(msgspec.Struct):
    max_capture_size: int | None = None


class ProfileFacts(msgspec.Struct):
    """The parts of a run's deployment profile (`Manifest.profile`, config.Profile as dumped) that
    calibration reads; the rest of the profile stays as it was written."""

    engine: str | None = None
    model: _ModelFacts = msgspec.field(default_factory=_ModelFacts)
    scheduler: _SchedulerFacts = msgspec.field(default_factory=_SchedulerFacts)
    kv_cache: _KVFacts = msgspec.field(default_factory=_KVFacts)
    parallel: _ParallelFacts = msgspec.field(default_factory=_ParallelFacts)
    cuda_graphs: _CudaGraphFacts = msgspec.field(default_factory=_CudaGraphFacts)


def profile_facts(run: Run) -> ProfileFacts:
    try:
        return msgspec.convert(run.manifest.profile or {}, ProfileFacts)
    except msgspec.ValidationError as exc:
        raise UsageError(f"{run.path}: the manifest's profile does not fit what calibration reads ({exc})") from None


@dataclass(frozen=True)
class TtftPoint:
    input_tokens: int
    ttft_s: float
    origin: str


@dataclass(frozen=True)
class DecodePoint:
    batch: int
    context_tokens: float
    s_per_token: float
    origin: str
    # A capacity window: sessions that started one by one. With P pipeline stages they decode in P
    # alternating steps of about batch / P sequences (each joined the step its last prefill chunk was in),
    # and a token's round trip is one such step's duration, as the simulator does it.
    window: bool = False

    def step_batch(self, stages: int) -> int:
        return math.ceil(self.batch / min(stages, self.batch)) if self.window else self.batch


@dataclass(frozen=True)
class FrontendPoint:
    input_tokens: int
    seconds: float
    origin: str


def parse_ttft(text: str) -> TtftPoint:
    try:
        tokens, seconds = text.split(":")
        return TtftPoint(int(tokens.replace(",", "").replace("_", "")), float(seconds), f"--ttft {text}")
    except ValueError:
        raise UsageError(f"--ttft {text!r}: want INPUT_TOKENS:SECONDS, e.g. 1000004:61.17") from None


def parse_decode(text: str) -> DecodePoint:
    try:
        batch, context, rate = text.split(":")
        return DecodePoint(
            int(batch), float(context.replace(",", "").replace("_", "")), 1.0 / float(rate), f"--decode {text}"
        )
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--decode {text!r}: want BATCH:CONTEXT_TOKENS:TOKENS_PER_S, e.g. 1:1000004:416.32") from None


DecodeRows = dict[tuple[str, int, int], list[tuple[float, float]]]  # (origin, batch, prompt length): (context, s/token)


@dataclass
class RunPoints:
    """What one run gives the fit (its scenario's `calibration_points`)."""

    ttft: list[TtftPoint] = field(default_factory=list)
    # TTFT points placed after every run's own: a throughput run's median of its one-at-a-time requests
    medians: list[TtftPoint] = field(default_factory=list)
    decode: DecodeRows = field(default_factory=dict)  # per-request decode rates, each group's median a point
    windows: list[DecodePoint] = field(default_factory=list)  # decode points of their own, after the groups
    frontend: list[FrontendPoint] = field(default_factory=list)
    kv_cache_tokens: int | None = None  # the engine's KV size the run states
    kv_inferred: int | None = None  # the KV size its /metrics imply


# calibration_points(run) -> RunPoints of each scenario whose runs calibrate (the catalog's `calibrate`)
calibrations: Registry[Callable[[Run], RunPoints]] = Registry.over("calibration input", column("calibrate"))


def request_points(run: Run, *, each_ttft: bool, by_length: bool) -> RunPoints:
    """A run of single requests: each successful request's cold TTFT (`each_ttft`; else the median of those
    sent one at a time, concurrency 1, as one point: an engine's first requests after start can take far
    longer, kernels compiled on first use, 0.72 s against 0.02 s on an eager H200 engine, and a few such
    requests must not decide the prefill fit), and the decode rate of each request of 8 tokens or more, grouped
    by concurrency (and prompt length, `by_length`: a prefill run's decode after L tokens is a context point)."""
    points = RunPoints()
    short: list[tuple[int, float]] = []
    for record in run.records:
        if not record.ok or record.ttft_ns is None:
            continue
        if each_ttft:
            points.ttft.append(
                TtftPoint(record.prompt_tokens or 0, record.ttft_ns / NS_PER_S, f"{run.run_id}/{record.request_id}")
            )
        elif record.concurrency == 1:
            short.append((record.prompt_tokens or 0, record.ttft_ns / NS_PER_S))
        out = record.output_tokens or 0
        if out >= 8 and record.last_token_ns and record.first_token_ns:
            per_token = (record.last_token_ns - record.first_token_ns) / NS_PER_S / (out - 1)
            context = (record.prompt_tokens or 0) + out / 2
            length = (record.prompt_tokens or 0) if by_length else 0
            key = (f"{run.run_id} {run.manifest.scenario}", record.concurrency, length)
            points.decode.setdefault(key, []).append((context, per_token))
    if short:
        points.medians.append(
            TtftPoint(
                round(statistics.median(n for n, _ in short)),
                statistics.median(t for _, t in short),
                f"{run.run_id}: median of {len(short)} requests at concurrency 1",
            )
        )
    return points


def points_from_runs(paths: list[Path]) -> tuple[list[TtftPoint], list[DecodePoint], dict[str, Any]]:
    """Cold single-request TTFTs and decode rates from run directories, each read by its scenario's
    `calibration_points`, plus engine facts. facts["frontend_points"] holds the request overhead that overlaps."""
    every = RunPoints()
    facts: dict[str, Any] = {}
    for path in paths:
        run = load_run(path)
        scenario = run.manifest.scenario or "unnamed"
        if scenario not in calibrations:
            raise UsageError(f"{path} is a {scenario} run: calibrate from {listing(calibrations.names(), ' or ')} runs")
        got = calibrations.get(scenario)(run)
        _facts(run, got, facts)
        every.ttft += got.ttft
        every.medians += got.medians
        every.windows += got.windows
        every.frontend += got.frontend
        for key, rows in got.decode.items():
            every.decode.setdefault(key, []).extend(rows)
        if got.kv_inferred:
            facts.setdefault("kv_inferred", []).append(got.kv_inferred)
            facts["kv_cache_tokens_inferred"] = round(statistics.median(facts["kv_inferred"]))
    ttft = every.ttft + every.medians
    points = [
        DecodePoint(
            batch,
            statistics.median(c for c, _ in rows),
            statistics.median(s for _, s in rows),
            f"{origin} c{batch}: median of {len(rows)} requests",
        )
        for (origin, batch, _), rows in sorted(every.decode.items())
    ] + every.windows
    if lengths := {p.input_tokens for p in ttft}:
        facts["ttft_lengths"] = sorted(lengths)
    facts["frontend_points"] = every.frontend
    return ttft, points, facts


def _facts(run: Run, points: RunPoints, facts: dict[str, Any]) -> None:
    """The engine's facts a run's manifest states, each kept from the first run that states it."""
    startup = run.manifest.engine_startup
    if startup is not None and startup.kv_cache_tokens:
        facts.setdefault("kv_cache_tokens", startup.kv_cache_tokens)
    if points.kv_cache_tokens:
        facts.setdefault("kv_cache_tokens", points.kv_cache_tokens)
    telemetry = run.manifest.telemetry
    if telemetry is not None and (names := [n for n in telemetry.names or [] if n]):
        facts.setdefault("gpu_model", names[0])
    if not run.manifest.profile:
        return
    profile = profile_facts(run)
    facts.setdefault("engine", profile.engine)
    facts.setdefault("max_model_len", profile.model.max_model_len)
    for key, value in (
        ("max_num_seqs", profile.scheduler.max_num_seqs),
        ("max_num_batched_tokens", profile.scheduler.max_num_batched_tokens),
    ):
        if value:
            facts.setdefault(key, value)
    if profile.kv_cache.block_size:
        facts.setdefault("block_size", profile.kv_cache.block_size)
    if profile.kv_cache.budget_gib_per_gpu:
        facts.setdefault("kv_budget_gib_per_gpu", profile.kv_cache.budget_gib_per_gpu)
    facts.setdefault("pipeline_stages", profile.parallel.pipeline or 1)
    if profile.cuda_graphs.max_capture_size:
        facts.setdefault("cuda_graph_max", profile.cuda_graphs.max_capture_size)
