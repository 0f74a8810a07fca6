"""What the simulator models: the KV budget, the scheduler's limits, the step cost, and the faults.

A sim profile is TOML (or JSON) with these fields; `loadproof sim calibrate` writes one from measured
runs. Times are modeled seconds; `time_scale` says how many modeled seconds pass per wall second when
the simulator serves HTTP (planning with `plan --simulate` never sleeps).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from loadproof.config.base import StrictModel, one_line
from loadproof.config.profile import (
    PACKAGED,
    Profile,
    packaged_model,
    packaged_profile,
    packaged_profiles,
    resolve_profile_path,
)
from loadproof.errors import ConfigError, UsageError
from loadproof.protocol.media import MediaTokens
from loadproof.sim.assumptions import Assumption


class CostModel(StrictModel):
    """Modeled duration of one engine step (one forward pass over the scheduled tokens, all stages).

    step_s = step_overhead_s                                    (the weight-bound part: weights read once a step)
           + prefill_s_per_token * prefill tokens
           + prefill_s_per_token_ctx * sum over prefill chunks of n * (c0 + n / 2)   (attention over the
             context already computed, c0, plus the chunk itself)
           + decode_s_per_seq * q                                (q: decode query tokens, B * (1 + draft length);
             in a decode-only step q is padded up to the next CUDA-graph capture size)
           + decode_s_per_ctx_token * sum of the decoding sequences' context lengths   (KV reads, summed)
           + decode_s_per_ctx_token_max * the longest decoding context   (one sequence's attention is split over
             a bounded share of the GPU: its own context sets a floor a small batch cannot hide)
           + decode_s_per_ctx_token_sq * sum of the decoding contexts squared   (per sequence: attention per
             context token that rises with the sequence's own context)
           + spec_draft_s * draft length                        (the drafter's passes)
    A decode-only step takes at least decode_kv_floor_s_per_token * the sum of the decoding contexts: the
    GPU reads every resident token's KV each step, at a share of its bandwidth, however much of that time the
    host's own work per step (an eager engine's) hides; `sim.calibration` sets it from the GPU and the KV bytes.
    With speculative decoding a decode-only step yields E = (1 - a^(k+1)) / (1 - a) tokens per sequence on
    average (a: acceptance rate, k: draft length at that batch size), or, from a measured acceptance by
    position (p_j: the share of drafts accepted at position j) and the share d of decode steps that drafted,
    E = 1 + d (p_0 + ... + p_(k-1)); the simulator emits one token per
    step and charges step_s / E for it. A step that also prefills is charged in full (its decodes' extra
    accepted tokens are not emitted: they change context lengths by a few tokens, not the time).

    A single cold prompt of L tokens in chunks of B on one stage therefore waits
    request_overhead_s + request_overhead_s_per_token * L + ceil(L / B) * step_overhead_s
    + prefill_s_per_token * L + prefill_s_per_token_ctx * L^2 / 2.
    With `pipeline_stages` P > 1 a step takes step_s / P (+ pp_transfer_s) on each stage and up to P steps
    are in flight (see `virtual.py`).
    """

    step_overhead_s: float = Field(default=0.02, ge=0)
    prefill_s_per_token: float = Field(default=1e-3, ge=0)
    prefill_s_per_token_ctx: float = Field(default=0.0, ge=0)
    decode_s_per_seq: float = Field(default=1e-3, ge=0)
    decode_s_per_ctx_token: float = Field(default=0.0, ge=0)
    decode_s_per_ctx_token_max: float = Field(
        default=0.0, ge=0, description="per step, times the longest decoding context"
    )
    decode_s_per_ctx_token_sq: float = Field(
        default=0.0,
        ge=0,
        description="per step, times the sum over "
        "decoding sequences of context^2 (attention per context token that "
        "rises with the sequence's own context)",
    )
    decode_kv_floor_s_per_token: float = Field(
        default=0.0,
        ge=0,
        description="a decode-only step lasts at least this times the sum of the decoding contexts (the KV read)",
    )
    request_overhead_s: float = Field(default=0.0, ge=0, description="HTTP, tokenization, first scheduling")
    request_overhead_s_per_token: float = Field(
        default=0.0,
        ge=0,
        description="the part of the request overhead "
        "that grows with the prompt (upload, tokenization); requests "
        "pay it concurrently, off the engine's critical path",
    )
    cuda_graph_sizes: list[int] = Field(
        default_factory=list,
        description="decode batch sizes with a captured CUDA graph; a decode-only step is padded up to the next one",
    )
    spec_draft_by_batch: list[list[int]] = Field(
        default_factory=list,
        description="[[max_batch, draft_length], ...]: speculative draft length by batch size (0 beyond the last)",
    )
    spec_acceptance: float = Field(default=0.0, ge=0, le=1, description="per-draft-token acceptance rate")
    spec_accepted_by_pos: list[float] = Field(
        default_factory=list,
        description="measured: the share of drafts "
        "whose token at position k (0 first) was accepted; replaces "
        "spec_acceptance where given (`sim calibrate --spec-from RUN`)",
    )
    spec_drafted_share: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="measured: the share of decode steps that carried a draft (n-gram lookup finds none for some)",
    )
    spec_draft_s: float = Field(default=0.0, ge=0, description="per draft position per step")
    pipeline_stages: int = Field(default=1, ge=1)
    pipeline_batching: Literal["alternating", "one_batch"] = Field(
        default="alternating",
        description="with stages: alternating, a step is scheduled while fewer than P are "
        "in flight, so decoding sessions run as P alternating micro-batches (vLLM's batch queue); one_batch, "
        "once no prompt is prefilling the in-flight steps are awaited first, so every session is in one step",
    )
    pp_transfer_s: float = Field(default=0.0, ge=0, description="per stage boundary per step")

    def draft_length(self, batch: int) -> int:
        for max_batch, k in sorted(self.spec_draft_by_batch):
            if batch <= max_batch:
                return k
        return 0

    def tokens_per_step(self, batch: int) -> float:
        """Expected tokens a decoding sequence gains per decode step (1 without speculative decoding): with a
        measured acceptance by position, 1 + the drafted share x the shares accepted at positions 0..k-1 (a
        position beyond the measured ones counts as never accepted); else the i.i.d. model's E."""
        k = self.draft_length(batch)
        if self.spec_accepted_by_pos:
            return 1.0 + self.spec_drafted_share * sum(self.spec_accepted_by_pos[:k]) if k > 0 else 1.0
        return expected_tokens(self.spec_acceptance, k)

    def padded(self, q: int) -> int:
        for size in sorted(self.cuda_graph_sizes):
            if size >= q:
                return size
        return q

    def decode_s(self, decode_contexts: list[int], *, graphs: bool) -> float:
        if not decode_contexts:
            return 0.0
        k = self.draft_length(len(decode_contexts))
        q = len(decode_contexts) * (1 + k)
        return (
            self.decode_s_per_seq * (self.padded(q) if graphs else q)
            + self.decode_s_per_ctx_token * sum(decode_contexts)
            + self.decode_s_per_ctx_token_max * max(decode_contexts)
            + self.decode_s_per_ctx_token_sq * sum(c * c for c in decode_contexts)
            + self.spec_draft_s * k
        )

    def step_s(self, prefill_chunks: list[tuple[int, int]], decode_contexts: list[int]) -> float:
        prefill_tokens = sum(n for _, n in prefill_chunks)
        attention = sum(n * (c0 + n / 2) for c0, n in prefill_chunks)
        step = (
            self.step_overhead_s
            + self.prefill_s_per_token * prefill_tokens
            + self.prefill_s_per_token_ctx * attention
            + self.decode_s(decode_contexts, graphs=not prefill_chunks)
        )
        if decode_contexts and not prefill_chunks:
            step = max(step, self.decode_kv_floor_s_per_token * sum(decode_contexts))
            step /= self.tokens_per_step(len(decode_contexts))
        return step

    def request_overhead(self, prompt_tokens: int) -> float:
        return self.request_overhead_s + self.request_overhead_s_per_token * prompt_tokens


def expected_tokens(acceptance: float, draft_length: int) -> float:
    """Tokens per verification step with i.i.d. acceptance: 1 + a + a^2 + ... + a^k."""
    if draft_length <= 0:
        return 1.0
    if acceptance >= 1.0:
        return float(draft_length + 1)
    return (1 - acceptance ** (draft_length + 1)) / (1 - acceptance)


def default_capture_sizes(max_size: int) -> list[int]:
    """vLLM's default CUDA-graph capture sizes up to max_size: 1, 2, 4, then every 8 (every 16 past 256)."""
    sizes = [s for s in (1, 2, 4) if s <= max_size] + list(range(8, min(max_size, 256) + 1, 8))
    return sizes + list(range(272, max_size + 1, 16))


Fault = Literal["crash", "hang", "slow", "error_event", "http_500", "http_503", "refuse", "wrong_answer", "drop"]


class FaultConfig(StrictModel):
    """Faults active from start; the control endpoint (POST /sim/faults) changes them at run time.

    `after_tokens`: mid-stream faults (error_event, drop) strike once a stream has sent this many tokens;
    `after_requests`: request-level faults spare the first N requests (so a readiness probe can pass).
    """

    active: list[Fault] = Field(default_factory=list)
    slowdown: float = Field(default=1.0, ge=1.0, description="'slow' multiplies every step's duration by this")
    after_tokens: int = Field(default=4, ge=0)
    after_requests: int = Field(default=0, ge=0)


class CalibrationInput(StrictModel):
    name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class SimConfig(StrictModel):
    model: str = "sim"
    lora_modules: list[str] = Field(
        default_factory=list,
        description="LoRA adapters listed at /v1/models beside "
        "the model, as vLLM's --lora-modules lists them, and served as the model is",
    )
    max_model_len: int = Field(default=32_768, ge=16)
    runner: Literal["generate", "pooling"] = Field(
        default="generate",
        description="pooling: an embedding model, "
        "as vLLM's --runner pooling (it serves /v1/embeddings and "
        "/v1/rerank, each input a prefill; not completions)",
    )
    embedding_dim: int = Field(default=64, ge=1, le=65_536, description="the vectors' length, with runner pooling")
    block_size: int = Field(default=16, ge=1)
    num_gpu_blocks: int = Field(default=8_192, ge=1, description="KV budget in blocks of block_size tokens")
    cpu_tier_blocks: int = Field(
        default=0,
        ge=0,
        description="a CPU tier (vLLM's --kv-offloading-size) in blocks: "
        "every computed block is also kept there, least recently used out; 0: none",
    )
    cpu_tier_s_per_token: float = Field(
        default=0.0,
        ge=0,
        description="loading a token's KV from the CPU tier "
        "(bytes a token / host-to-device bandwidth), added to the step that loads it",
    )
    max_num_seqs: int = Field(default=256, ge=1)
    max_num_batched_tokens: int = Field(default=2_048, ge=1, description="per-step token budget")
    long_prefill_token_threshold: int = Field(
        default=0, ge=0, description="0: a prefill chunk may take the whole budget"
    )
    reserve_full_sequence: bool = Field(
        default=True,
        description="admit a waiting request only when its whole "
        "prompt fits (vLLM's scheduler_reserve_full_isl, default since 2026)",
    )
    enable_prefix_caching: bool = True
    cost: CostModel = Field(default_factory=CostModel)
    time_scale: float = Field(default=1.0, gt=0, description="modeled seconds per wall second when serving")
    load_s: float = Field(
        default=0.0,
        ge=0,
        description="seconds before the server listens, as an engine "
        "loading its weights (wall seconds: load_s / time_scale)",
    )
    seed: int = 0
    step_jitter: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="each step's duration times a lognormal factor of mean 1 and this log-scale sd, drawn from "
        "`seed` (a real engine's step times vary with the host's scheduling and the GPU's clocks; the cost model's "
        "alone are a lattice of a few values); 0: every step the cost model's time",
    )
    reasoning_share: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="a reasoning model: the share of a "
        "thinking chat request's output tokens streamed as reasoning before its answer "
        "(only when the request asks for thinking); 0: never reasons",
    )
    reasoning_field: Literal["reasoning", "reasoning_content"] = Field(
        default="reasoning",
        description="the delta field reasoning streams under: vLLM's since 0.10, or "
        "reasoning_content (vLLM before 0.10, SGLang)",
    )
    image_tokens: str = Field(
        default="fixed:64",
        description="the prompt tokens of an image (a video: of each frame), as protocol.media.MediaTokens reads "
        "a rule: fixed:N or patches:P, each with an optional +K of markers; empty: not a multimodal model, images "
        "and videos refused with a 400",
    )
    audio_tokens: str = Field(
        default="per_s:50",
        description="the prompt tokens of an audio item: per_s:R (+K); empty: audio refused with a 400",
    )
    # a deployment's own rules in place of the ones above, by field (`predict.deployment`: a deployment profile's
    # `[model] image_tokens`/`audio_tokens`): where each came from, for the prediction's output; never written
    media_tokens_from: dict[str, str] = Field(default_factory=dict, exclude=True)
    mm_cache_items: int = Field(
        default=256,
        ge=0,
        description="the multimodal processor cache, in media items (least recently used out): an item whose "
        "content was seen before is a hit (vllm:mm_cache_hits); 0: no cache",
    )
    faults: FaultConfig = Field(default_factory=FaultConfig)
    source: str = Field(default="defaults", description="where these figures came from (calibration inputs)")
    inputs: list[CalibrationInput] = Field(
        default_factory=list,
        description="the calibration's inputs and their sha256 (a run folder's: over its files' names and sha256)",
    )
    assumptions: list[Assumption] = Field(
        default_factory=list, description="what the inputs do not pin, each with its plausible values (sim.assumptions)"
    )

    @field_validator("image_tokens", "audio_tokens")
    @classmethod
    def _media_rule(cls, text: str, info: ValidationInfo) -> str:
        if not text:
            return text
        rule = MediaTokens.parse(text)  # MediaError (a ValueError) names the rule and the forms
        audio = info.field_name == "audio_tokens"
        if (rule.kind == "per_s") != audio:
            raise ValueError(f"{text!r}: give {'per_s:R' if audio else 'fixed:N or patches:P'}")
        return text

    @property
    def kv_cache_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


def load_sim_config(path: Path | None) -> SimConfig:
    if path is None:
        return SimConfig()
    if not path.is_file():
        raise UsageError(f"no sim profile at {path}")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        return SimConfig.model_validate(data)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    except ValidationError as exc:
        raise one_line(exc, str(path)) from None


def dump_sim_config(config: SimConfig) -> str:
    """TOML text for a sim profile (flat tables only, so no TOML writer is needed)."""
    lines: list[str] = []
    nested = {}
    for key, value in config.model_dump().items():
        if isinstance(value, dict):
            nested[key] = value
        else:
            lines.append(f"{key} = {_toml(value)}")
    for table, values in nested.items():
        lines.append(f"\n[{table}]")
        lines += [f"{k} = {_toml(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, dict):  # an inline table (the assumptions' variants)
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value))


def is_sim_profile(path: Path) -> bool:
    """A sim profile has a [cost] table and no [model] table (a deployment profile has [model])."""
    try:
        data = (
            tomllib.loads(path.read_text(encoding="utf-8")) if path.suffix != ".json" else json.loads(path.read_text())
        )
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and "cost" in data
        and "model" not in data
        or (isinstance(data, dict) and isinstance(data.get("model"), str))
    )


def sim_profile_of(profile: Profile) -> Path | None:
    """The sim profile a deployment profile's engine runs, where its model.path is one (`engine = "sim"`;
    `packaged:NAME` resolved to the package's); None for any other model."""
    path = profile.model.path
    file = packaged_model(path.removeprefix(PACKAGED)) if path.startswith(PACKAGED) else Path(path)
    return file if is_sim_profile(file) else None


def simulator_profiles() -> list[str]:
    """The packaged profiles whose engine is the simulator: each stands for its sim profile by name."""
    return [name for name in sorted(packaged_profiles()) if sim_profile_of(packaged_profile(name)) is not None]


def sim_profile_path(text: str | Path, flag: str) -> Path:
    """A sim profile named on the command line (`flag`: `--sim`, `--config`, SIM_PROFILE): an existing file (read
    as a sim profile by its caller), or the name of a packaged profile whose engine is the simulator
    (`sim-small`), standing for the sim profile it runs. A name of neither is one line."""
    if Path(text).is_file():
        return Path(text)
    try:
        resolve_profile_path(text)  # a packaged profile's name, or the one line that lists them
    except ConfigError as exc:
        raise ConfigError(f"{flag}: {exc}") from None
    own = sim_profile_of(packaged_profile(str(text)))
    if own is None:
        raise UsageError(
            f"{flag} {text}: not a sim profile (write one with `loadproof sim calibrate`); of the packaged profiles, "
            f"those whose engine is the simulator stand for theirs: {', '.join(simulator_profiles())}"
        )
    return own
