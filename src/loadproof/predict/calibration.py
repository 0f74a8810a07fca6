"""`loadproof sim calibrate`'s work below the command line: which inputs the fit gets, the sim profile it
starts from, and the calibrated profile written.

The fit itself is `predict.calibrate` (measured runs and figures) and `predict.published` (a
published-figures file). Here: the engine limits a user gave or the runs' profiles hold
(`CalibrationLimits`), the base `SimConfig` from them, what the inputs leave open (each assumption with its
values), and the profile written as TOML. The optional grid of capacity runs measured first on a real engine
is `predict.grid`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loadproof.engines import engines
from loadproof.errors import UsageError
from loadproof.predict.calibrate import Calibration, calibrate
from loadproof.predict.points import parse_decode, parse_ttft, points_from_runs
from loadproof.predict.published import (
    DEFAULT_FRONTEND_S_PER_TOKEN,
    KV_READ_EFFICIENCY,
    calibrate_published,
    gpu_bandwidth,
    read_published,
)
from loadproof.predict.throughput import measured_drafts
from loadproof.sim.assumptions import Assumption, Variant, from_fits, pinned, scheduler_assumptions
from loadproof.sim.config import CalibrationInput, CostModel, SimConfig, default_capture_sizes, dump_sim_config
from loadproof.store.digest import measurement_digest
from loadproof.store.run_dir import load_run

KV_READ_EFFICIENCIES = (0.6, 0.7, 0.8, 0.9)  # of a GPU's peak bandwidth, as decode-attention kernels reach
FRONTEND_VALUES = (0.0, DEFAULT_FRONTEND_S_PER_TOKEN / 2, DEFAULT_FRONTEND_S_PER_TOKEN)
ATTENTION_SHARES = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class CalibrationLimits:
    """The engine's limits and structure as the user gave them; None: what the runs say, else a default."""

    kv_tokens: int | None = None
    block_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    pipeline_stages: int | None = None
    cuda_graph_max: int | None = None
    model: str = "sim"


@dataclass(frozen=True)
class FitShares:
    """The shares and overheads a user may fix instead of letting the fit choose."""

    acceptance: float | None = None
    prefill_attention_share: float | None = None
    decode_context_share: float | None = None
    frontend_s_per_token: float | None = None

    def check(self) -> None:
        for name, value in (
            ("--acceptance", self.acceptance),
            ("--prefill-attention-share", self.prefill_attention_share),
            ("--decode-context-share", self.decode_context_share),
        ):
            if value is not None and not 0 <= value <= 1:
                raise UsageError(f"{name} must be between 0 and 1")


@dataclass(frozen=True)
class Calibrated:
    calibration: Calibration
    path: Path
    notes: tuple[str, ...] = ()  # what was assumed on the way, for the user


def calibrate_from_published(path: Path, out: Path, limits: CalibrationLimits, shares: FitShares) -> Calibrated:
    """A sim profile from a published-figures file alone (docs/simulator.md), written to `out`."""
    shares.check()
    pub = read_published(path)
    share = shares.prefill_attention_share
    given: dict[str, Any] = dict(
        block_size=limits.block_size or 16,
        acceptance=shares.acceptance,
        prefill_attention_share=0.5 if share is None else share,
        frontend_s_per_token=shares.frontend_s_per_token,
        model=limits.model,
    )
    cal = calibrate_published(pub, **given)

    def fitted(**change: Any) -> SimConfig:
        return calibrate_published(pub, **{**given, **change}).config

    point = cal.config
    found: list[Assumption] = []
    if gpu_bandwidth(pub.gpu_model) and pub.kv_budget_gib_per_gpu:  # the context cost from the GPU, assumed
        found.append(
            from_fits(
                "kv_read_efficiency",
                KV_READ_EFFICIENCY,
                {e: fitted(kv_read_efficiency=e) for e in KV_READ_EFFICIENCIES},
                point,
            )
        )
    if shares.frontend_s_per_token is not None:
        found.append(pinned("frontend_s_per_token", shares.frontend_s_per_token, "--frontend-s-per-token"))
    else:
        found.append(
            from_fits(
                "frontend_s_per_token",
                DEFAULT_FRONTEND_S_PER_TOKEN,
                {v: fitted(frontend_s_per_token=v) for v in FRONTEND_VALUES},
                point,
            )
        )
    lengths = [length for length, _, _ in pub.ttft]
    if max(lengths) / min(lengths) < 1.2:  # one prompt length: its prefill's split is assumed
        found.append(
            pinned("prefill_attention_share", share, "--prefill-attention-share")
            if share is not None
            else from_fits(
                "prefill_attention_share", 0.5, {v: fitted(prefill_attention_share=v) for v in ATTENTION_SHARES}, point
            )
        )
    if shares.acceptance is not None:
        found.append(pinned("draft_acceptance", shares.acceptance, "--acceptance"))
    elif cal.short_acceptance is not None:
        long_text = point.cost.spec_acceptance
        found.append(
            Assumption(
                name="draft_acceptance",
                point=long_text,
                variants=[
                    Variant(value=long_text),
                    Variant(value=cal.short_acceptance, overrides={"cost.spec_acceptance": cal.short_acceptance}),
                ],
            )
        )
    found += scheduler_assumptions(point)  # a published file does not state the scheduler's threshold
    config = point.model_copy(update={"assumptions": found, "inputs": [file_input(path)]})
    cal = replace(cal, config=config)
    return Calibrated(cal, write_profile(cal, out))


def calibrate_from_runs(
    runs: list[Path],
    ttft: list[str],
    decode: list[str],
    out: Path,
    limits: CalibrationLimits,
    shares: FitShares,
    spec_from: Path | None = None,
) -> Calibrated:
    """A sim profile fitted to run directories and figures given by hand, written to `out`; with `spec_from`,
    the draft schedule and acceptance by position a throughput run with drafts measured (predict.throughput), applied to
    the fitted step cost (fit it to runs without drafts)."""
    shares.check()
    drafts = measured_drafts(spec_from) if spec_from is not None else None
    ttft_points, decode_points, facts = points_from_runs(runs)
    ttft_points += [parse_ttft(t) for t in ttft]
    decode_points += [parse_decode(d) for d in decode]
    base, notes = base_config(facts, limits)
    cal = calibrate(
        ttft_points,
        decode_points,
        base,
        decode_context_share=shares.decode_context_share,
        frontend=facts.get("frontend_points"),
        frontend_s_per_token=shares.frontend_s_per_token,
        prefill_attention_share=shares.prefill_attention_share,
    )
    if drafts is not None:
        cost = cal.config.cost.model_copy(
            update={
                "spec_draft_by_batch": drafts.draft_by_batch,
                "spec_accepted_by_pos": drafts.accepted_by_pos,
                "spec_drafted_share": drafts.drafted_share,
            }
        )
        cal = replace(cal, config=cal.config.model_copy(update={"cost": cost}), used=[*cal.used, drafts.source])

    def fitted(**change: Any) -> SimConfig:
        kw = dict(
            decode_context_share=shares.decode_context_share,
            frontend=facts.get("frontend_points"),
            frontend_s_per_token=shares.frontend_s_per_token,
            prefill_attention_share=shares.prefill_attention_share,
        )
        return calibrate(ttft_points, decode_points, base, **{**kw, **change}).config

    found = run_assumptions(cal, facts, shares, fitted, spec_from)
    floor, said, point_cost = kv_read_floor(cal, facts)
    if floor is not None:
        found.append(floor)
        cal = replace(cal, config=cal.config.model_copy(update={"cost": cal.config.cost.model_copy(update=point_cost)}))
    cal = replace(cal, assumptions=[*cal.assumptions, *said])
    inputs = (
        [run_input(r) for r in runs]
        + [text_input(f"--ttft {t}") for t in ttft]
        + [text_input(f"--decode {d}") for d in decode]
        + ([run_input(spec_from)] if spec_from is not None else [])
    )
    cal = replace(cal, config=cal.config.model_copy(update={"assumptions": found, "inputs": inputs}))
    return Calibrated(cal, write_profile(cal, out), notes)


def run_assumptions(
    cal: Calibration, facts: dict[str, Any], shares: FitShares, fitted: Callable[..., SimConfig], spec_from: Path | None
) -> list[Assumption]:
    """What measured runs leave open, each re-fitted under every plausible value, or pinned by the input
    that fixes it."""
    point = cal.config
    frontend = facts.get("frontend_points") or []
    found: list[Assumption] = []
    h1 = point.cost.request_overhead_s_per_token
    if shares.frontend_s_per_token is not None:
        found.append(pinned("frontend_s_per_token", shares.frontend_s_per_token, "--frontend-s-per-token"))
    elif frontend:
        found.append(
            pinned("frontend_s_per_token", h1, "capacity runs: " + ", ".join(sorted({p.origin for p in frontend})))
        )
    else:
        found.append(
            from_fits(
                "frontend_s_per_token",
                0.0,
                {v: fitted(frontend_s_per_token=v) for v in (0.0, DEFAULT_FRONTEND_S_PER_TOKEN)},
                point,
            )
        )
    if len({(p.batch, round(p.context_tokens)) for p in cal.decode_points}) == 1:
        share = shares.decode_context_share
        found.append(
            pinned("decode_context_share", share, "--decode-context-share")
            if share is not None
            else from_fits(
                "decode_context_share", 0.5, {v: fitted(decode_context_share=v) for v in ATTENTION_SHARES}, point
            )
        )
    if len({p.input_tokens for p in cal.ttft_points}) == 1:
        share = shares.prefill_attention_share
        found.append(
            pinned("prefill_attention_share", share, "--prefill-attention-share")
            if share is not None
            else from_fits(
                "prefill_attention_share", 0.0, {v: fitted(prefill_attention_share=v) for v in (0.0, 0.25, 0.5)}, point
            )
        )
    if spec_from is not None:
        found.append(
            pinned(
                "draft_acceptance",
                round(point.cost.tokens_per_step(1) - 1, 4),
                f"the drafts measured in {spec_from.name}",
            )
        )
    return found + scheduler_assumptions(
        point, prefills_pinned_by="the runs' engine settings" if facts.get("engine") else ""
    )


def kv_read_floor(cal: Calibration, facts: dict[str, Any]) -> tuple[Assumption | None, list[str], dict[str, Any]]:
    """The KV-read floor of a decode step. Every resident token's KV is read each step, at some share e of
    the GPU's bandwidth, so a decode-only step lasts at least bytes x stages / (bandwidth x e) per summed
    context token. An eager engine's host work per step can hide that read up to some context, and a fit to
    runs that stay below it sees no cost of context at all; beyond it the floor takes over. Where the runs
    name the GPU and the KV bytes per token (their profile's KV budget over the KV tokens), each plausible
    e that no decode point contradicts (a point faster than its floor would be) is a value; the point is the
    lowest of them, the least the runs allow; "fit" (no floor) is the other end. Returns the assumption,
    what was said, and the cost field its point sets."""
    config, points = cal.config, cal.decode_points
    bandwidth, budget = gpu_bandwidth(facts.get("gpu_model") or ""), facts.get("kv_budget_gib_per_gpu")
    if not points:
        return None, [], {}
    if not bandwidth or not budget:
        return (
            None,
            [
                "a decode step's cost of context beyond the runs' is the fit's extrapolation (the runs do not "
                "name a GPU of known bandwidth and a KV budget in GiB, which would bound it from below)"
            ],
            {},
        )
    stages = config.cost.pipeline_stages
    bytes_per_token = budget * 2**30 / config.kv_cache_tokens
    per_token = bytes_per_token * stages / bandwidth  # a step's seconds per resident token at e = 1

    def needs(p: Any) -> float:  # the least efficiency under which the point's step is not below its floor
        return float(per_token * p.step_batch(stages) * p.context_tokens / p.s_per_token)

    needed = max(points, key=needs)
    least = needs(needed)
    allowed = [e for e in KV_READ_EFFICIENCIES if e >= least]
    if not allowed:
        return (
            pinned(
                "kv_read_efficiency",
                "fit",
                f"{needed.origin}: it decoded faster than a KV read at "
                f"{max(KV_READ_EFFICIENCIES):.0%} of the bandwidth allows",
            ),
            [],
            {},
        )
    point = allowed[0]
    variants = [Variant(value="fit", overrides={"cost.decode_kv_floor_s_per_token": 0.0})]
    variants += [
        Variant(value=e, overrides={} if e == point else {"cost.decode_kv_floor_s_per_token": per_token / e})
        for e in allowed
    ]
    said = (
        f"a decode step reads every resident token's KV, {bytes_per_token:,.0f} bytes per token per GPU, at "
        f"{point:.0%} of the {facts['gpu_model']}'s {bandwidth / 1e12:.2f} TB/s at best (the least of "
        f"{', '.join(f'{e:.0%}' for e in KV_READ_EFFICIENCIES)} that no decode point contradicts; "
        f"{needed.origin} needs {least:.0%}): a step lasts at least {per_token / point * 1e12:.1f} ps per "
        "resident token (the kv_read_efficiency assumption's point)"
    )
    return (
        Assumption(name="kv_read_efficiency", point=point, variants=variants),
        [said],
        {"decode_kv_floor_s_per_token": per_token / point},
    )


def file_input(path: Path) -> CalibrationInput:
    return CalibrationInput(name=path.name, sha256=hashlib.sha256(path.read_bytes()).hexdigest())


def text_input(text: str) -> CalibrationInput:
    return CalibrationInput(name=text, sha256=hashlib.sha256(text.encode()).hexdigest())


def run_input(folder: Path) -> CalibrationInput:
    """A run folder: the sha256 of its records' measured numbers (`store.digest.measurement_digest`),
    which its published copy shares."""
    return CalibrationInput(name=folder.name, sha256=measurement_digest(load_run(folder).records))


def base_config(facts: dict[str, Any], limits: CalibrationLimits) -> tuple[SimConfig, tuple[str, ...]]:
    """The profile the fit starts from: each limit as given, else as the runs' facts say, else the engine
    adapter's default; and what was assumed."""
    adapter = engines.get(facts["engine"]) if facts.get("engine") in engines.names() else None
    block = limits.block_size or facts.get("block_size") or (adapter.default_block_size if adapter else 16)
    tokens = limits.kv_tokens or facts.get("kv_cache_tokens")
    notes: list[str] = []
    if not tokens and facts.get("kv_cache_tokens_inferred"):
        tokens = facts["kv_cache_tokens_inferred"]
        notes.append(
            f"assumed: KV cache of {tokens:,} tokens, inferred from the capacity runs' /metrics (prompt "
            "tokens resident / KV usage); give --kv-tokens to set it"
        )
    if not tokens:
        raise UsageError("the KV cache size is unknown: give --kv-tokens (no run holds an engine startup report)")
    length = limits.max_model_len or facts.get("max_model_len")
    if not length:
        raise UsageError("the context length is unknown: give --max-model-len")
    if (limits.pipeline_stages is not None and limits.pipeline_stages < 1) or (
        limits.cuda_graph_max is not None and limits.cuda_graph_max < 1
    ):
        raise UsageError("--pipeline-stages and --cuda-graph-max must be >= 1")
    graphs = limits.cuda_graph_max or facts.get("cuda_graph_max")
    structure = CostModel(
        pipeline_stages=limits.pipeline_stages or facts.get("pipeline_stages") or 1,
        cuda_graph_sizes=default_capture_sizes(graphs) if graphs else [],
    )
    budget = (
        limits.max_num_batched_tokens
        or facts.get("max_num_batched_tokens")
        or (adapter.default_max_num_batched_tokens if adapter else 8192)
    )
    config = SimConfig(
        model=limits.model,
        max_model_len=length,
        block_size=block,
        num_gpu_blocks=max(1, tokens // block),
        max_num_seqs=limits.max_num_seqs or facts.get("max_num_seqs") or 256,
        max_num_batched_tokens=budget,
        cost=structure,
    )
    return config, tuple(notes)


def write_profile(cal: Calibration, out: Path) -> Path:
    out.write_text(dump_sim_config(cal.config), encoding="utf-8")
    return out
