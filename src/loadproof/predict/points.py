"""What `loadproof sim calibrate` fits to: its points, read from measured runs or given by hand.

Run directories give cold TTFTs (`TtftPoint`: a prefill run's requests, a throughput run's one-at-a-time
requests as their median, a capacity run's first session), decode rates (`DecodePoint`: per request, by
concurrency and prompt length; a capacity run's window as N streams), the part of a capacity run's TTFT that
overlaps with other requests' prefills (`FrontendPoint`), and the engine's facts from the runs' manifests
(`ProfileFacts`: limits, KV size, pipeline stages, CUDA-graph limit). `--ttft L:SECONDS` and `--decode
BATCH:CONTEXT:TOKENS_PER_S` give points by hand. The fit itself is `sim.calibrate`.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from loadproof.errors import UsageError
from loadproof.plans import load_plan
from loadproof.plans.capacity import CapacityPlan
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


def points_from_runs(paths: list[Path]) -> tuple[list[TtftPoint], list[DecodePoint], dict[str, Any]]:
    """Cold single-request TTFTs and decode rates from run directories, plus engine facts.

    facts["frontend_points"] holds what capacity runs show of the request overhead that overlaps.
    """
    ttft: list[TtftPoint] = []
    decode: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
    short: dict[str, list[tuple[int, float]]] = {}  # a throughput run's one-at-a-time requests
    extra_decode: list[DecodePoint] = []
    frontend: list[FrontendPoint] = []
    facts: dict[str, Any] = {}
    for path in paths:
        run = load_run(path)
        scenario = run.manifest.scenario
        startup = run.manifest.engine_startup
        if startup is not None and startup.kv_cache_tokens:
            facts.setdefault("kv_cache_tokens", startup.kv_cache_tokens)
        plan = load_plan(run) if scenario == "capacity" else None
        if isinstance(plan, CapacityPlan) and plan.engine_kv_cache_tokens:
            facts.setdefault("kv_cache_tokens", plan.engine_kv_cache_tokens)
        telemetry = run.manifest.telemetry
        if telemetry is not None and (names := [n for n in telemetry.names or [] if n]):
            facts.setdefault("gpu_model", names[0])
        if run.manifest.profile:
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
        if isinstance(plan, CapacityPlan):
            _capacity_points(run, ttft, extra_decode, frontend)
            # only where every session started: the highest-usage sample then has every prompt resident
            if all(r.ttft_ns for r in run.records) and (inferred := kv_from_metrics(run, plan)):
                facts.setdefault("kv_inferred", []).append(inferred)
                facts["kv_cache_tokens_inferred"] = round(statistics.median(facts["kv_inferred"]))
            continue
        if scenario not in ("prefill", "throughput"):
            raise UsageError(f"{path} is a {scenario} run: calibrate from prefill, throughput or capacity runs")
        for record in run.records:
            if not record.ok or record.ttft_ns is None:
                continue
            if scenario == "prefill":
                ttft.append(
                    TtftPoint(record.prompt_tokens or 0, record.ttft_ns / NS_PER_S, f"{run.run_id}/{record.request_id}")
                )
            elif record.concurrency == 1:
                short.setdefault(run.run_id, []).append((record.prompt_tokens or 0, record.ttft_ns / NS_PER_S))
            out = record.output_tokens or 0
            if out >= 8 and record.last_token_ns and record.first_token_ns:
                per_token = (record.last_token_ns - record.first_token_ns) / NS_PER_S / (out - 1)
                context = (record.prompt_tokens or 0) + out / 2
                # grouped by prompt length too: a prefill run's decode after L tokens is a context point
                length = (record.prompt_tokens or 0) if scenario == "prefill" else 0
                decode.setdefault((f"{run.run_id} {scenario}", record.concurrency, length), []).append(
                    (context, per_token)
                )
    # A throughput run's short prompts at concurrency 1 give one TTFT point, their median: an engine's first
    # requests after start can take far longer (kernels compiled on first use: 0.72 s against 0.02 s on an
    # eager H200 engine), and a few such requests must not decide the prefill fit.
    for run_id, rows in short.items():
        ttft.append(
            TtftPoint(
                round(statistics.median(n for n, _ in rows)),
                statistics.median(t for _, t in rows),
                f"{run_id}: median of {len(rows)} requests at concurrency 1",
            )
        )
    points = [
        DecodePoint(
            batch,
            statistics.median(c for c, _ in rows),
            statistics.median(s for _, s in rows),
            f"{origin} c{batch}: median of {len(rows)} requests",
        )
        for (origin, batch, _), rows in sorted(decode.items())
    ] + extra_decode
    if scenario_lengths := {p.input_tokens for p in ttft}:
        facts["ttft_lengths"] = sorted(scenario_lengths)
    facts["frontend_points"] = frontend
    return ttft, points, facts


def kv_from_metrics(run: Run, plan: CapacityPlan | None = None) -> int | None:
    """A capacity run's KV size when its manifest does not state it: the prompt tokens resident / the KV
    usage, at the /metrics sample with the highest usage (a configuration fact, not a performance figure).
    `plan`: the run's capacity plan (read from the run when not given)."""
    read = plan if plan is not None else load_plan(run)
    length = read.input_tokens if isinstance(read, CapacityPlan) else 0
    best = max(
        (
            (v.get("kv_cache_usage_perc") or 0.0, v.get("num_requests_running") or 0.0)
            for v in (s.values for s in run.samples)
        ),
        default=(0.0, 0.0),
    )
    usage, running = best
    if usage <= 0 or running <= 0 or not length:
        return None
    return int(running * length / (usage if usage <= 1 else usage / 100))


def _capacity_points(run: Any, ttft: list[TtftPoint], decode: list[DecodePoint], frontend: list[FrontendPoint]) -> None:
    """A capacity run as calibration input: its first session's cold TTFT (nothing else was in the
    engine), the spacing of the next first tokens (the engine's time per prompt, so the first TTFT minus
    it is the overhead a lone request pays and a batch overlaps), and the window's decode rate."""
    firsts = sorted((r.ttft_ns / NS_PER_S, r) for r in run.records if r.ttft_ns)
    if not firsts:
        return
    length = firsts[0][1].prompt_tokens or 0
    ttft.append(TtftPoint(length, firsts[0][0], f"{run.run_id} first of {len(firsts)} cold TTFTs"))
    diffs = [b - a for (a, _), (b, _) in zip(firsts, firsts[1:])][:3]
    if diffs:
        frontend.append(
            FrontendPoint(
                length,
                max(0.0, firsts[0][0] - statistics.median(diffs)),
                f"{run.run_id}: first TTFT - median of the next {len(diffs)} spacings",
            )
        )
    claims_path = run.path / "claims.json"
    claims = (
        {c["name"]: c["value"] for c in json.loads(claims_path.read_text(encoding="utf-8")).get("claims", [])}
        if claims_path.is_file()
        else {}
    )
    rate = claims.get("capacity.window_aggregate_tokens_per_s")
    sessions = len(firsts)
    if isinstance(rate, (int, float)) and rate > 0 and sessions == len(run.records):
        outputs = [r.output_tokens or 0 for _, r in firsts]
        decode.append(
            DecodePoint(
                sessions,
                length + statistics.mean(outputs) / 2,
                sessions / rate,
                f"{run.run_id} window: {sessions} streams",
                window=True,
            )
        )
