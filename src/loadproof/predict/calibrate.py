"""`loadproof sim calibrate`: fit the step cost model to measured figures.

Inputs are points (`predict.points`) read from run directories (prefill runs give cold TTFT at a prompt length
and the decode rate after it; throughput runs give per-request decode rates at a few concurrencies and the
median TTFT of their one-at-a-time requests; capacity runs give the first session's cold TTFT, the batch's
decode rate at its context in the window, and, from the spacing of the first tokens, the part of a request's
TTFT that overlaps with other requests' prefills), explicit points (`--ttft L:SECONDS`, `--decode
BATCH:CONTEXT:TOKENS_PER_S`), or a published-figures file (`published.py`).

Fits, in this order (non-negative least squares, relative residuals):
- frontend: first TTFT - engine time per prompt = request_overhead_s + request_overhead_s_per_token * L
  over capacity runs (requests upload and tokenize concurrently, the engine prefills one after another);
- decode: seconds per token * tokens per step = step_overhead_s + decode_s_per_seq * padded batch
  + decode_s_per_ctx_token * batch * context (+ decode_s_per_ctx_token_sq * batch * context^2
  + decode_s_per_ctx_token_max * context, only when they cut the residual by a fifth); a capacity
  window's N streams count as steps of N / P sequences with P pipeline stages (see DecodePoint);
- prefill: TTFT(L) - frontend(L) = request_overhead_s + f_P * (ceil(L / B) * step_overhead_s
  + prefill_s_per_token * L + prefill_s_per_token_ctx * L^2 / 2), f_P = (n + P - 1) / (n P) for n chunks
  through P pipeline stages.
Where the points cannot separate the terms (one decode point, one TTFT length), the split is an explicit
assumption written into the profile's `source` and printed: never a silent choice.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field

from loadproof.errors import UsageError
from loadproof.predict.points import DecodePoint, FrontendPoint, TtftPoint
from loadproof.sim.config import CostModel, SimConfig


@dataclass
class Calibration:
    config: SimConfig
    ttft_points: list[TtftPoint]
    decode_points: list[DecodePoint]
    assumptions: list[str] = field(default_factory=list)
    residuals: list[str] = field(default_factory=list)
    used: list[str] = field(default_factory=list)  # what each input figure was used for
    short_acceptance: float | None = None  # published: the short prompts' fitted acceptance, beside the long text's


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


def pipeline_factor(n_chunks: int, stages: int) -> float:
    """Share of the summed chunk work a lone prompt waits for when its n chunks stream through P stages."""
    return (n_chunks + stages - 1) / (n_chunks * stages)


def fit_frontend(points: list[FrontendPoint]) -> float:
    """Seconds per prompt token of the overhead requests pay concurrently (least squares through 0)."""
    den = sum(p.input_tokens**2 for p in points)
    return max(0.0, sum(p.seconds * p.input_tokens for p in points) / den) if den else 0.0


def calibrate(
    ttft: list[TtftPoint],
    decode: list[DecodePoint],
    base: SimConfig,
    *,
    decode_context_share: float | None = None,
    frontend: list[FrontendPoint] | None = None,
    frontend_s_per_token: float | None = None,
    prefill_attention_share: float | None = None,
) -> Calibration:
    """Fit the step costs; `base.cost` gives the structure (pipeline stages, CUDA-graph sizes)."""
    if not ttft:
        raise UsageError("no cold single-request TTFT to calibrate prefill from (give prefill runs or --ttft)")
    if not decode:
        raise UsageError("no decode rate to calibrate from (give throughput/prefill runs or --decode)")
    assumptions: list[str] = []
    used: list[str] = []
    structure = base.cost
    distinct_decode = {(p.batch, round(p.context_tokens)) for p in decode}
    kmax = per_sq = 0.0
    if len(distinct_decode) == 1 or decode_context_share is not None:
        share = 0.5 if decode_context_share is None else decode_context_share
        only = decode[0]
        t0 = only.s_per_token * (1 - share)
        per_ctx = only.s_per_token * share / max(only.step_batch(structure.pipeline_stages) * only.context_tokens, 1.0)
        per_seq = 0.0
        assumptions.append(
            f"one decode point: {share:.0%} of its {only.s_per_token * 1e3:.3f} ms step is taken as "
            f"proportional to resident context, the rest fixed per step (--decode-context-share)"
        )
    else:
        stages = structure.pipeline_stages
        rows = [
            [
                1 / p.s_per_token,
                structure.padded(p.step_batch(stages)) / p.s_per_token,
                p.step_batch(stages) * p.context_tokens / p.s_per_token,
                p.step_batch(stages) * p.context_tokens**2 / p.s_per_token,
                p.context_tokens / p.s_per_token,
            ]
            for p in decode
        ]
        # The per-sequence terms beyond the summed context (context squared, the longest context) only
        # enter when they explain what the summed-context term cannot: with few points they coincide with
        # it, and the summed one is the physical default (every sequence's KV is read once per step).
        t0, per_seq, per_ctx, per_sq = nnls([r[:3] + [0.0] for r in rows], [1.0] * len(decode))
        with_max = nnls(rows, [1.0] * len(decode))

        def rms(coef: list[float]) -> float:
            return math.sqrt(sum((sum(a * b for a, b in zip(r, coef)) - 1) ** 2 for r in rows) / len(rows))

        if rms(with_max) < 0.8 * rms([t0, per_seq, per_ctx, per_sq, 0.0]) - 0.01:
            t0, per_seq, per_ctx, per_sq, kmax = with_max
    used += [f"decode step fit: {p.origin} ({p.batch} x ~{p.context_tokens:,.0f} tokens)" for p in decode]
    # The part of the TTFT that requests pay concurrently (upload, tokenization), from capacity runs.
    if frontend_s_per_token is not None:
        h1 = frontend_s_per_token
        if h1:
            assumptions.append(
                f"request overhead growing with the prompt taken as {h1 * 1e6:.2f} us/token (--frontend-s-per-token)"
            )
    elif frontend:
        h1 = fit_frontend(frontend)
        if len({p.input_tokens for p in frontend}) == 1:
            assumptions.append(
                f"overlapping request overhead seen at one prompt length only: taken as growing with "
                f"the prompt ({h1 * 1e6:.2f} us/token), none fixed"
            )
        used += [
            f"overlapping request overhead: {p.origin} ({p.seconds:.3f} s at {p.input_tokens:,} tokens)"
            for p in frontend
        ]
    else:
        h1 = 0.0
    budget = base.max_num_batched_tokens
    stages = structure.pipeline_stages
    lengths = {p.input_tokens for p in ttft}

    def chunks(length: int) -> int:
        return math.ceil(length / budget)

    ys = [
        p.ttft_s - h1 * p.input_tokens - pipeline_factor(chunks(p.input_tokens), stages) * chunks(p.input_tokens) * t0
        for p in ttft
    ]
    if len(lengths) == 1:
        lone = ttft[0]
        h = 0.0
        work = max(statistics.median(ys), 0.0) / pipeline_factor(chunks(lone.input_tokens), stages)
        if prefill_attention_share is None:
            a, b = work / lone.input_tokens, 0.0
            assumptions.append(
                f"one prompt length ({lone.input_tokens:,} tokens): prefill taken as linear in length "
                "(no attention term, no fixed request overhead)"
            )
        else:
            a = work * (1 - prefill_attention_share) / lone.input_tokens
            b = work * prefill_attention_share / (lone.input_tokens**2 / 2)
            assumptions.append(
                f"one prompt length ({lone.input_tokens:,} tokens): {prefill_attention_share:.0%} of its "
                "prefill taken as attention (quadratic in length), the rest linear, no fixed request "
                "overhead (--prefill-attention-share)"
            )
    else:
        rows = [
            [
                1.0,
                pipeline_factor(chunks(p.input_tokens), stages) * p.input_tokens,
                pipeline_factor(chunks(p.input_tokens), stages) * p.input_tokens**2 / 2,
            ]
            for p in ttft
        ]
        h, a, b = nnls(
            [[v / max(p.ttft_s, 1e-9) for v in r] for r, p in zip(rows, ttft)],
            [y / max(p.ttft_s, 1e-9) for y, p in zip(ys, ttft)],
        )
    used += [f"prefill fit: {p.origin} (cold TTFT {p.ttft_s:.3f} s at {p.input_tokens:,} tokens)" for p in ttft]
    cost = structure.model_copy(
        update=dict(
            step_overhead_s=t0,
            prefill_s_per_token=a,
            prefill_s_per_token_ctx=b,
            decode_s_per_seq=per_seq,
            decode_s_per_ctx_token=per_ctx,
            decode_s_per_ctx_token_max=kmax,
            decode_s_per_ctx_token_sq=per_sq,
            request_overhead_s=h,
            request_overhead_s_per_token=h1,
        )
    )
    source = (
        f"calibrated from {len(ttft)} TTFT point(s) at {sorted(lengths)} tokens and {len(decode)} decode "
        f"point(s)" + ("; assumed: " + "; ".join(assumptions) if assumptions else "")
    )
    config = base.model_copy(update={"cost": cost, "source": source})
    cal = Calibration(config, ttft, decode, assumptions, used=used)
    for p in ttft:
        model = lone_ttft_s(cost, p.input_tokens, budget)
        cal.residuals.append(
            f"TTFT {p.input_tokens:>9,} tokens: measured {p.ttft_s:8.3f} s, model {model:8.3f} s "
            f"({(model - p.ttft_s) / p.ttft_s:+.1%})"
        )
    for d in decode:
        model = cost.step_s([], [round(d.context_tokens)] * d.step_batch(cost.pipeline_stages))
        cal.residuals.append(
            f"decode batch {d.batch:>3} at ~{d.context_tokens:,.0f} tokens: measured "
            f"{1 / d.s_per_token:8.2f} tokens/s, model {1 / model:8.2f} tokens/s "
            f"({(d.s_per_token - model) / model:+.1%})"
        )
    return cal


def lone_ttft_s(cost: CostModel, length: int, budget: int) -> float:
    """The model's cold TTFT of one prompt alone in the engine (closed form of what the simulator does)."""
    n = math.ceil(length / budget)
    work = n * cost.step_overhead_s + cost.prefill_s_per_token * length + cost.prefill_s_per_token_ctx * length**2 / 2
    return cost.request_overhead(length) + pipeline_factor(n, cost.pipeline_stages) * work
