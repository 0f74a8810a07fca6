"""`loadproof sim calibrate`: fit the step cost model to measured single-request figures.

Inputs are run directories (prefill runs give cold TTFT at a prompt length and the decode rate after
it; throughput runs give per-request decode rates at a few concurrencies) and/or explicit points
(`--ttft L:SECONDS`, `--decode BATCH:CONTEXT:TOKENS_PER_S`, e.g. from a published report).

Two non-negative least-squares fits, in this order:
- decode: step_s = step_overhead_s + decode_s_per_seq * batch + decode_s_per_ctx_token * batch * context
  over points (batch, mean context, measured seconds per token);
- prefill: TTFT(L) - ceil(L / B) * step_overhead_s = request_overhead_s + prefill_s_per_token * L
  + prefill_s_per_token_ctx * L^2 / 2 over cold single-request TTFTs.
Where the points cannot separate the terms (one decode point, one TTFT point), the split is an explicit
assumption written into the profile's `source` and printed: never a silent choice.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadproof.errors import UsageError
from loadproof.sim.config import CostModel, SimConfig
from loadproof.store.run_dir import load_run
from loadproof.units import NS_PER_S


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


@dataclass
class Calibration:
    config: SimConfig
    ttft_points: list[TtftPoint]
    decode_points: list[DecodePoint]
    assumptions: list[str] = field(default_factory=list)
    residuals: list[str] = field(default_factory=list)


def parse_ttft(text: str) -> TtftPoint:
    try:
        tokens, seconds = text.split(":")
        return TtftPoint(int(tokens.replace(",", "").replace("_", "")), float(seconds), f"--ttft {text}")
    except ValueError:
        raise UsageError(f"--ttft {text!r}: want INPUT_TOKENS:SECONDS, e.g. 1000004:61.17") from None


def parse_decode(text: str) -> DecodePoint:
    try:
        batch, context, rate = text.split(":")
        return DecodePoint(int(batch), float(context.replace(",", "").replace("_", "")), 1.0 / float(rate),
                           f"--decode {text}")
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--decode {text!r}: want BATCH:CONTEXT_TOKENS:TOKENS_PER_S, e.g. 1:1000004:416.32") from None


def points_from_runs(paths: list[Path]) -> tuple[list[TtftPoint], list[DecodePoint], dict[str, Any]]:
    """Cold single-request TTFTs and per-request decode rates from run directories, plus engine facts."""
    ttft: list[TtftPoint] = []
    decode: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
    facts: dict[str, Any] = {}
    for path in paths:
        run = load_run(path)
        scenario = run.manifest.get("scenario")
        startup = (run.manifest.get("engine") or {}).get("startup_report") or {}
        if startup.get("kv_cache_tokens"):
            facts.setdefault("kv_cache_tokens", startup["kv_cache_tokens"])
        profile = run.manifest.get("profile") or {}
        if profile:
            facts.setdefault("engine", profile.get("engine"))
            facts.setdefault("max_model_len", (profile.get("model") or {}).get("max_model_len"))
            for key in ("max_num_seqs", "max_num_batched_tokens"):
                value = (profile.get("scheduler") or {}).get(key)
                if value:
                    facts.setdefault(key, value)
            if (profile.get("kv_cache") or {}).get("block_size"):
                facts.setdefault("block_size", profile["kv_cache"]["block_size"])
        if scenario not in ("prefill", "throughput"):
            raise UsageError(f"{path} is a {scenario} run: calibrate from single-request runs "
                             "(prefill, throughput); predicting multi-session runs is the simulator's job")
        for record in run.records:
            if not record.ok or record.ttft_ns is None:
                continue
            if scenario == "prefill" or record.concurrency == 1:
                ttft.append(TtftPoint(record.prompt_tokens or 0, record.ttft_ns / NS_PER_S, f"{run.run_id}/{record.request_id}"))
            out = record.output_tokens or 0
            if out >= 8 and record.last_token_ns and record.first_token_ns:
                per_token = (record.last_token_ns - record.first_token_ns) / NS_PER_S / (out - 1)
                context = (record.prompt_tokens or 0) + out / 2
                # grouped by prompt length too: a prefill run's decode after L tokens is a context point
                length = (record.prompt_tokens or 0) if scenario == "prefill" else 0
                decode.setdefault((scenario, record.concurrency, length), []).append((context, per_token))
    points = [DecodePoint(batch, statistics.median(c for c, _ in rows), statistics.median(s for _, s in rows),
                          f"{scenario} c{batch}: median of {len(rows)} requests")
              for (scenario, batch, _), rows in sorted(decode.items())]
    if scenario_lengths := {p.input_tokens for p in ttft}:
        facts["ttft_lengths"] = sorted(scenario_lengths)
    return ttft, points, facts


def nnls(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Least squares with every coefficient >= 0, by trying each subset of columns (few columns here)."""
    k = len(rows[0])
    best: tuple[float, list[float]] | None = None
    for size in range(1, k + 1):
        for cols in itertools.combinations(range(k), size):
            coef = _lstsq([[r[c] for c in cols] for r in rows], ys)
            if coef is None or any(c < 0 for c in coef):
                continue
            full = [0.0] * k
            for c, v in zip(cols, coef):
                full[c] = v
            err = sum((sum(a * b for a, b in zip(r, full)) - y) ** 2 for r, y in zip(rows, ys))
            if best is None or err < best[0] - 1e-18:
                best = (err, full)
    return best[1] if best else [0.0] * k


def _lstsq(rows: list[list[float]], ys: list[float]) -> list[float] | None:
    n = len(rows[0])
    if len(rows) < n:
        return None
    # normal equations, scaled per column for conditioning
    scale = [max(abs(r[j]) for r in rows) or 1.0 for j in range(n)]
    a = [[sum(r[i] / scale[i] * r[j] / scale[j] for r in rows) for j in range(n)] for i in range(n)]
    b = [sum(r[i] / scale[i] * y for r, y in zip(rows, ys)) for i in range(n)]
    for col in range(n):  # Gaussian elimination with partial pivoting
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        b[col], b[pivot] = b[pivot], b[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
                b[r] -= f * b[col]
    return [b[i] / a[i][i] / scale[i] for i in range(n)]


def calibrate(ttft: list[TtftPoint], decode: list[DecodePoint], base: SimConfig, *,
              decode_context_share: float | None = None) -> Calibration:
    if not ttft:
        raise UsageError("no cold single-request TTFT to calibrate prefill from (give prefill runs or --ttft)")
    if not decode:
        raise UsageError("no decode rate to calibrate from (give throughput/prefill runs or --decode)")
    assumptions: list[str] = []
    distinct_decode = {(p.batch, round(p.context_tokens)) for p in decode}
    if len(distinct_decode) == 1 or decode_context_share is not None:
        share = 0.5 if decode_context_share is None else decode_context_share
        p = decode[0]
        t0 = p.s_per_token * (1 - share)
        per_ctx = p.s_per_token * share / max(p.batch * p.context_tokens, 1.0)
        per_seq = 0.0
        assumptions.append(f"one decode point: {share:.0%} of its {p.s_per_token * 1e3:.3f} ms step is taken as "
                           f"proportional to resident context, the rest fixed per step (--decode-context-share)")
    else:
        rows = [[1.0, float(p.batch), p.batch * p.context_tokens] for p in decode]
        t0, per_seq, per_ctx = nnls(rows, [p.s_per_token for p in decode])
    budget = base.max_num_batched_tokens
    lengths = {p.input_tokens for p in ttft}
    ys = [p.ttft_s - math.ceil(p.input_tokens / budget) * t0 for p in ttft]
    if len(lengths) == 1:
        p = ttft[0]
        h = 0.0
        a = max(statistics.median(ys), 0.0) / p.input_tokens
        b = 0.0
        assumptions.append(f"one prompt length ({p.input_tokens:,} tokens): prefill taken as linear in length "
                           "(no attention term, no fixed request overhead)")
    else:
        rows = [[1.0, float(p.input_tokens), p.input_tokens ** 2 / 2] for p in ttft]
        h, a, b = nnls(rows, ys)
    cost = CostModel(step_overhead_s=t0, prefill_s_per_token=a, prefill_s_per_token_ctx=b, decode_s_per_seq=per_seq,
                     decode_s_per_ctx_token=per_ctx, request_overhead_s=h)
    source = (f"calibrated from {len(ttft)} TTFT point(s) at {sorted(lengths)} tokens and {len(decode)} decode "
              f"point(s)" + ("; assumed: " + "; ".join(assumptions) if assumptions else ""))
    config = base.model_copy(update={"cost": cost, "source": source})
    cal = Calibration(config, ttft, decode, assumptions)
    for p in ttft:
        model = cost.request_overhead_s + math.ceil(p.input_tokens / budget) * t0 + a * p.input_tokens + b * p.input_tokens ** 2 / 2
        cal.residuals.append(f"TTFT {p.input_tokens:>9,} tokens: measured {p.ttft_s:8.3f} s, model {model:8.3f} s "
                             f"({(model - p.ttft_s) / p.ttft_s:+.1%})")
    for p in decode:
        model = t0 + per_seq * p.batch + per_ctx * p.batch * p.context_tokens
        cal.residuals.append(f"decode batch {p.batch:>3} at ~{p.context_tokens:,.0f} tokens: measured "
                             f"{1 / p.s_per_token:8.2f} tokens/s, model {1 / model:8.2f} tokens/s "
                             f"({(p.s_per_token - model) / model:+.1%})")
    return cal
