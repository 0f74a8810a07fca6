"""A deployment's published figures (a vendor's or a colleague's report) as simulator calibration.

The file format is documented in docs/simulator.md ("Calibrating from published figures"); an example
is docs/examples/reference-published.toml. `read_published` validates it (one line per problem, as a
UsageError); `calibrate_published` turns it into a sim profile and says what each figure was used for
and what had to be assumed.
"""

from __future__ import annotations

import math
import re
import statistics
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from loadproof.errors import UsageError
from loadproof.predict.calibrate import Calibration, lone_ttft_s, nnls, pipeline_factor
from loadproof.sim.config import CostModel, SimConfig, default_capture_sizes, expected_tokens

# Peak memory bandwidth per GPU (bytes/s), for the KV-read prior of decode attention.
GPU_BANDWIDTH = {
    "rtx pro 6000": 1.792e12,
    "h200": 4.8e12,
    "h100": 3.35e12,
    "h20": 4.0e12,
    "b200": 8.0e12,
    "a100": 2.0e12,
    "l40s": 0.864e12,
    "gb200": 8.0e12,
}
KV_READ_EFFICIENCY = 0.8  # share of peak bandwidth a decode-attention kernel reaches on long contexts
RATES_TABLE = "throughput"  # the file's table of decode rates by concurrency (a table's name, not the scenario)
DEFAULT_BUDGET = 8192  # vLLM's max_num_batched_tokens for the OpenAI server on GPUs of 70 GiB or more
# The part of a lone request's TTFT that a batch overlaps (upload, tokenization), per prompt token, as
# measured on two H200s: the MLA capacity runs in docs/runs (first TTFT minus the spacing of the next first
# tokens: 0.71 s at 190K and 0.55 s at 200K, 3.2 us/token; at 1M 1.42 s, understated by the decodes that
# share the later prefills) and issue 19's 4-layer stand-in (16.56 s alone, 13.3 s apart in a batch).
DEFAULT_FRONTEND_S_PER_TOKEN = 3.2e-6


@dataclass
class Published:
    path: Path
    gpus: int
    gpu_model: str
    tensor_parallel: int
    pipeline_parallel: int
    kv_cache_tokens: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int | None
    kv_budget_gib_per_gpu: float | None
    cuda_graph_max_batch: int | None
    draft_by_batch: list[list[int]]
    ttft: list[tuple[int, float, str]]  # (input tokens, seconds, origin)
    long_decode: tuple[int, float] | None  # (context tokens, tokens/s) of one request after a long prompt
    throughput: dict[str, dict[int, float]]  # family -> concurrency -> figure
    ignored: list[str] = field(default_factory=list)


def _err(path: Path, what: str) -> UsageError:
    return UsageError(f"{path}: {what}")


@overload
def _int(path: Path, table: dict[str, Any], name: str, key: str) -> int: ...
@overload
def _int(path: Path, table: dict[str, Any], name: str, key: str, *, required: bool) -> int | None: ...
def _int(path: Path, table: dict[str, Any], name: str, key: str, *, required: bool = True) -> int | None:
    value = table.get(key)
    if value is None:
        if required:
            raise _err(path, f"[{name}] {key} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _err(path, f"[{name}] {key} = {value!r}: want a positive integer")
    return value


@overload
def _num(path: Path, table: dict[str, Any], name: str, key: str) -> float: ...
@overload
def _num(path: Path, table: dict[str, Any], name: str, key: str, *, required: bool) -> float | None: ...
def _num(path: Path, table: dict[str, Any], name: str, key: str, *, required: bool = True) -> float | None:
    value = table.get(key)
    if value is None:
        if required:
            raise _err(path, f"[{name}] {key} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or math.isnan(value):
        raise _err(path, f"[{name}] {key} = {value!r}: want a positive number")
    return float(value)


def parse_draft_schedule(text: Any, path: Path) -> list[list[int]]:
    """ "draft length 5 for batches of 1-4 sequences, 3 for batches of 5-32" or [[4, 5], [32, 3]]."""
    if text is None or text is False or text == "none":
        return []
    if isinstance(text, list):
        try:
            rows = [[int(a), int(b)] for a, b in text]
        except (TypeError, ValueError):
            raise _err(path, f"[deployment] speculative = {text!r}: want [[max_batch, draft_length], ...]") from None
        return sorted(rows)
    if not isinstance(text, str):
        raise _err(path, f"[deployment] speculative = {text!r}: want a draft schedule")
    rows = [
        [int(hi), int(k)] for k, _lo, hi in re.findall(r"(\d+)\s+for\s+batch(?:es)?\s+of\s+(\d+)\s*-\s*(\d+)", text)
    ]
    if not rows:
        raise _err(path, f"[deployment] speculative = {text!r}: no 'K for batches of A-B' in it")
    return sorted(rows)


def read_published(path: Path) -> Published:
    if not path.is_file():
        raise UsageError(f"no published-figures file at {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _err(path, f"not valid TOML: {exc}") from None
    for table in ("deployment", "single_request"):
        if not isinstance(data.get(table), dict):
            raise _err(path, f"no [{table}] table")
    dep, single = data["deployment"], data["single_request"]
    ignored = [f"[{k}]" for k in data if k not in ("deployment", "single_request", RATES_TABLE)]
    tp = _int(path, dep, "deployment", "tensor_parallel", required=False) or 1
    pp = _int(path, dep, "deployment", "pipeline_parallel", required=False) or 1
    ttft: list[tuple[int, float, str]] = []
    if "cold_prefill_ttft_median_s" in single:
        seconds = _num(path, single, "single_request", "cold_prefill_ttft_median_s")
        tokens = single.get("cold_prefill_input_tokens")
        if isinstance(tokens, list) and tokens and all(isinstance(t, int) and t > 0 for t in tokens):
            length = round(statistics.mean(tokens))
        elif isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
            length = tokens
        else:
            raise _err(path, f"[single_request] cold_prefill_input_tokens = {tokens!r}: want a token count or a list")
        ttft.append((length, seconds, "[single_request] cold_prefill_ttft_median_s"))
    long_decode = None
    if "relay_input_tokens" in single or "relay_ttft_s" in single:
        length = _int(path, single, "single_request", "relay_input_tokens")
        ttft.append(
            (
                length,
                _num(path, single, "single_request", "relay_ttft_s"),
                "[single_request] relay_ttft_s",
            )
        )
        rate = _num(path, single, "single_request", "relay_decode_tokens_per_s", required=False)
        if rate and length is not None:
            long_decode = (length, rate)
    if not ttft:
        raise _err(path, "[single_request] has no cold TTFT (cold_prefill_ttft_median_s or relay_ttft_s)")
    throughput: dict[str, dict[int, float]] = {}
    for family, figures in (data.get(RATES_TABLE) or {}).items():
        if family == "definition":
            continue
        if not isinstance(figures, dict):
            raise _err(path, f"[throughput] {family} = {figures!r}: want {{ c1 = RATE, c4 = RATE, ... }}")
        row: dict[int, float] = {}
        for key, value in figures.items():
            m = re.fullmatch(r"c(\d+)", key)
            if not m or isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise _err(path, f"[throughput] {family}.{key} = {value!r}: want cN = positive tokens/s")
            row[int(m.group(1))] = float(value)
        if 1 not in row:
            raise _err(path, f"[throughput] {family} has no c1 (single-request rate)")
        throughput[family] = row
    budget = dep.get("max_num_batched_tokens")
    return Published(
        path=path,
        gpus=_int(path, dep, "deployment", "gpus", required=False) or tp * pp,
        gpu_model=str(dep.get("gpu_model") or "unknown"),
        tensor_parallel=tp,
        pipeline_parallel=pp,
        kv_cache_tokens=_int(path, dep, "deployment", "kv_cache_tokens"),
        max_model_len=_int(path, dep, "deployment", "max_model_len"),
        max_num_seqs=_int(path, dep, "deployment", "max_num_seqs"),
        max_num_batched_tokens=budget
        if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0
        else (
            None
            if budget is None or isinstance(budget, str)
            else _int(path, dep, "deployment", "max_num_batched_tokens")
        ),
        kv_budget_gib_per_gpu=_num(path, dep, "deployment", "kv_budget_gib_per_gpu", required=False),
        cuda_graph_max_batch=_int(path, dep, "deployment", "cuda_graph_max_batch", required=False),
        draft_by_batch=parse_draft_schedule(dep.get("speculative"), path),
        ttft=ttft,
        long_decode=long_decode,
        throughput=throughput,
        ignored=ignored,
    )


def gpu_bandwidth(model: str) -> float | None:
    name = model.lower()
    for key, bw in GPU_BANDWIDTH.items():
        if key in name:
            return bw
    return None


def calibrate_published(
    pub: Published,
    *,
    block_size: int = 16,
    acceptance: float | None = None,
    prefill_attention_share: float = 0.5,
    frontend_s_per_token: float | None = None,
    kv_read_efficiency: float = KV_READ_EFFICIENCY,
    model: str = "sim",
) -> Calibration:
    used: list[str] = []
    assumed: list[str] = []
    frontend_given = frontend_s_per_token
    if frontend_s_per_token is None:
        frontend_s_per_token = DEFAULT_FRONTEND_S_PER_TOKEN
    budget = pub.max_num_batched_tokens or DEFAULT_BUDGET
    if pub.max_num_batched_tokens is None:
        assumed.append(
            f"max_num_batched_tokens not published: vLLM's default {DEFAULT_BUDGET} for the OpenAI server "
            "on GPUs of 70 GiB or more"
        )
    assumed.append(f"KV block size {block_size} (--block-size)")
    sizes = default_capture_sizes(pub.cuda_graph_max_batch) if pub.cuda_graph_max_batch else []
    used.append(
        f"[deployment] kv_cache_tokens {pub.kv_cache_tokens:,}, max_model_len {pub.max_model_len:,}, "
        f"max_num_seqs {pub.max_num_seqs}: the KV pool and scheduler limits"
    )
    used.append(
        f"[deployment] pipeline_parallel {pub.pipeline_parallel}: {pub.pipeline_parallel} pipeline stage(s) "
        "with as many steps in flight"
    )
    if sizes:
        used.append(
            f"[deployment] cuda_graph_max_batch {pub.cuda_graph_max_batch}: decode steps padded to vLLM's "
            f"capture sizes ({', '.join(map(str, sizes[:6]))}, ...)"
        )
    if pub.draft_by_batch:
        used.append(
            "[deployment] speculative: draft length by batch "
            + ", ".join(f"<= {b}: {k}" for b, k in pub.draft_by_batch)
        )
    structure = CostModel(
        pipeline_stages=pub.pipeline_parallel, cuda_graph_sizes=sizes, spec_draft_by_batch=pub.draft_by_batch
    )

    # 1. Short-prompt decode: per-token time x tokens per step = t0 + s * padded(B * (1 + k)), with the
    #    acceptance rate a of the families' text fitted over a grid (c1, c4 and c8 differ in k and B).
    points: list[tuple[int, float]] = []  # (batch, seconds per token per stream), mean over families
    conc = sorted({c for row in pub.throughput.values() for c in row})
    for c in conc:
        rates = [row[c] / (1 if c == 1 else c) for row in pub.throughput.values() if c in row]
        points.append((c, 1.0 / statistics.mean(rates)))
        used.append(
            f"[throughput] c{c} (mean over {len(rates)} families"
            + ("" if c == 1 else f", aggregate / {c} as the per-stream rate, TTFT included")
            + "): decode fit"
        )
    if len(points) < 2:
        raise UsageError(f"{pub.path}: [throughput] needs at least two concurrencies to fit the decode step")

    def fit(alpha: float) -> tuple[float, float, float]:
        rows, ys = [], []
        for b, spt in points:
            k = structure.draft_length(b)
            y = spt * expected_tokens(alpha, k)
            rows.append([1 / y, structure.padded(b * (1 + k)) / y])
            ys.append(1.0)
        t0, s = nnls(rows, ys)
        err = sum((r[0] * t0 + r[1] * s - 1) ** 2 for r in rows)
        return t0, s, err

    grid = [acceptance] if acceptance is not None else [i / 100 for i in range(0, 100)]
    fits = {a: fit(a) for a in grid}
    alpha_short = min(fits, key=lambda a: fits[a][2])
    t0, per_token, err = fits[alpha_short]
    if acceptance is None and pub.draft_by_batch:
        good = [a for a in grid if fits[a][2] <= err + 1e-4]
        pinned = max(good) - min(good) <= 0.1
        used.append(
            f"acceptance of the short-prompt text fitted: {alpha_short:.2f} (relative fit error "
            f"{math.sqrt(err / len(points)):.1%}; {min(good):.2f}-{max(good):.2f} fit about as well"
            + ("" if pinned else ": the inputs do not pin it")
            + ")"
        )
    elif acceptance is not None:
        assumed.append(f"acceptance rate {acceptance:.2f} (--acceptance)")

    # 2. Decode attention over context: KV bytes per token per GPU / bandwidth, one stage after another.
    bw = gpu_bandwidth(pub.gpu_model)
    per_ctx = 0.0
    if bw and pub.kv_budget_gib_per_gpu:
        bytes_per_token = pub.kv_budget_gib_per_gpu * 2**30 / pub.kv_cache_tokens
        per_ctx = bytes_per_token * pub.pipeline_parallel / (bw * kv_read_efficiency)
        used.append(
            f"[deployment] kv_budget_gib_per_gpu {pub.kv_budget_gib_per_gpu:g} / kv_cache_tokens: "
            f"{bytes_per_token:,.0f} KV bytes per token per GPU, read once per decode step per sequence"
        )
        assumed.append(
            f"decode attention reads each sequence's KV at {kv_read_efficiency:.0%} of the "
            f"{pub.gpu_model}'s {bw / 1e12:.2f} TB/s, stages one after another: "
            f"{per_ctx * 1e9:.3f} ns per context token per step"
        )
    else:
        assumed.append("no GPU bandwidth or KV budget known: decode cost taken as independent of context")

    # 3. The long-context decode rate (a different text): its acceptance, given the context cost.
    alpha = alpha_short
    if pub.long_decode and pub.draft_by_batch and acceptance is None:
        ctx, rate = pub.long_decode
        step = t0 + per_token * structure.padded(1 + structure.draft_length(1)) + per_ctx * ctx
        want = step * rate  # tokens per step it achieved
        k1 = structure.draft_length(1)
        alpha = min((i / 1000 for i in range(1000)), key=lambda a: abs(expected_tokens(a, k1) - want))
        used.append(
            f"[single_request] relay_decode_tokens_per_s {rate:g} at {ctx:,} tokens: {want:.2f} tokens per "
            f"step, so acceptance {alpha:.3f} for long-context text"
        )
        assumed.append(
            f"the capacity scenario's output decodes like the long-context relay text (acceptance "
            f"{alpha:.3f}, not the short prompts' {alpha_short:.2f}): pass --acceptance to change it"
        )
    elif pub.long_decode:
        used.append("[single_request] relay_decode_tokens_per_s: residual only (acceptance given or no drafts)")

    # 4. Prefill from the cold TTFTs, with the steps' fixed part and the pipeline fill.
    lengths = [length for length, _, _ in pub.ttft]
    work = []
    for length, seconds, origin in pub.ttft:
        n = math.ceil(length / budget)
        w = (seconds - frontend_s_per_token * length) / pipeline_factor(n, pub.pipeline_parallel) - n * t0
        work.append((length, w))
        used.append(f"{origin} = {seconds:g} s at {length:,} tokens: prefill fit")
    if max(lengths) / min(lengths) < 1.2:
        length = round(statistics.mean(lengths))
        w = statistics.mean(w for _, w in work)
        a = w * (1 - prefill_attention_share) / length
        b = w * prefill_attention_share / (length**2 / 2)
        assumed.append(
            f"one prompt length (~{length:,} tokens): {prefill_attention_share:.0%} of prefill taken as "
            "attention, quadratic in length (--prefill-attention-share)"
        )
    else:  # two lengths: linear + quadratic exactly
        (l1, w1), (l2, w2) = sorted(work)[0], sorted(work)[-1]
        b = max(0.0, (w2 / l2 - w1 / l1) / ((l2 - l1) / 2))
        a = max(0.0, w1 / l1 - b * l1 / 2)
    if frontend_given is None:
        assumed.append(
            f"{frontend_s_per_token * 1e6:.1f} us per prompt token of the lone TTFT is upload and "
            "tokenization, which a batch overlaps with other prefills (as measured on two H200s: the MLA "
            "capacity runs in docs/runs; --frontend-s-per-token)"
        )
    elif frontend_s_per_token:
        assumed.append(
            f"request overhead that overlaps other prefills: {frontend_s_per_token * 1e6:.2f} us/token "
            "(--frontend-s-per-token)"
        )
    else:
        assumed.append(
            "no request overhead overlaps other prefills: the lone TTFT is all engine time (--frontend-s-per-token 0)"
        )
    for name in pub.ignored:
        used.append(f"{name}: not used (not this deployment's figures)")

    cost = structure.model_copy(
        update=dict(
            step_overhead_s=t0,
            decode_s_per_seq=per_token,
            decode_s_per_ctx_token=per_ctx,
            spec_acceptance=alpha,
            prefill_s_per_token=a,
            prefill_s_per_token_ctx=b,
            request_overhead_s_per_token=frontend_s_per_token,
        )
    )
    source = (
        f"published figures {pub.path.name}: {len(pub.ttft)} cold TTFT(s), {len(points)} throughput "
        f"concurrencies"
        + (", a long-context decode rate" if pub.long_decode else "")
        + "; assumed: "
        + "; ".join(assumed)
    )
    config = SimConfig(
        model=model,
        max_model_len=pub.max_model_len,
        block_size=block_size,
        num_gpu_blocks=max(1, pub.kv_cache_tokens // block_size),
        max_num_seqs=pub.max_num_seqs,
        max_num_batched_tokens=budget,
        cost=cost,
        source=source,
    )
    cal = Calibration(
        config,
        [],
        [],
        assumed,
        used=used,
        short_acceptance=alpha_short if pub.draft_by_batch and acceptance is None else None,
    )
    for length, seconds, _origin in pub.ttft:
        got = lone_ttft_s(cost, length, budget)
        cal.residuals.append(
            f"TTFT {length:>9,} tokens: published {seconds:8.3f} s, model {got:8.3f} s "
            f"({(got - seconds) / seconds:+.1%})"
        )
    for b, spt in points:
        k = cost.draft_length(b)
        got = (t0 + per_token * cost.padded(b * (1 + k))) / expected_tokens(alpha_short, k)
        cal.residuals.append(
            f"decode c{b:<3} short prompts: published {1 / spt:8.2f} tokens/s per stream, model "
            f"{1 / got:8.2f} ({(1 / got - 1 / spt) * spt:+.1%}) at acceptance {alpha_short:.2f}"
        )
    if pub.long_decode:
        ctx, rate = pub.long_decode
        got = 1 / cost.step_s([], [ctx])
        cal.residuals.append(
            f"decode c1 at {ctx:,} tokens: published {rate:8.2f} tokens/s, model {got:8.2f} "
            f"({(got - rate) / rate:+.1%})"
        )
    return cal
