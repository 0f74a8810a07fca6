"""KV cache capacity from a model's config, following vLLM's own accounting (v1 KV cache manager).

Per layer and token, a KV cache holds:
- MHA/GQA/MQA: 2 (K and V) x kv_heads_per_rank x head_dim x bytes; kv_heads_per_rank =
  max(1, kv_heads / TP) (heads are replicated when there are fewer than TP ranks);
- MLA: (kv_lora_rank + qk_rope_head_dim) x bytes, one latent replicated on every TP rank (with
  `fp8_ds_mla`, vLLM's packed layout of 656 bytes per token);
A block holds `block_size` tokens. With one attention type every layer of a rank shares the block
ids, so a block costs page x layers. With several types (e.g. Gemma 3's 5 sliding : 1 full), vLLM
groups layers of a type into groups of `group_size` layers (the smallest type count, or the largest
when they are within 1.5x), and a block costs page x group_size; a request then needs, per group,
cdiv(max_model_len, block) blocks for full attention, and cdiv(min(window - 1 + in-flight tokens,
max_model_len), block) + 1 for a sliding window (`SlidingWindowSpec.max_memory_usage_bytes`). The
in-flight tokens are vLLM's `max_in_flight_tokens` = max_num_batched_tokens x the batches in flight
at once (`max_concurrent_batches`): the pipeline stages, plus one with asynchronous scheduling on the
V2 model runner (2 for one stage on either runner). vLLM-CPU turns async scheduling off (1 batch);
vLLM 0.26 on a GPU has it on by default (2 batches of 8,192 tokens for one stage). The engine reports
`KV cache size = num_blocks / blocks_per_request(max_model_len) x max_model_len` tokens. With
pipeline parallelism each stage holds its own layers and budget; the smallest stage decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadproof.errors import ConfigError

GIB = 1024**3
# vLLM's fp8_ds_mla layout: 512 fp8 latent bytes, 4 float32 scales, 64 bf16 rope values per token
FP8_DS_MLA_BYTES_PER_TOKEN = 512 + 4 * 4 + 64 * 2
_DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2}


def dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    name = model_dtype if kv_cache_dtype == "auto" else kv_cache_dtype
    if name.startswith("fp8") or name.startswith("int8"):
        return 1
    if name not in _DTYPE_BYTES:
        raise ConfigError(f"unknown KV cache dtype {name!r}")
    return _DTYPE_BYTES[name]


@dataclass(frozen=True)
class Layer:
    kind: str  # "full", "sliding", "mla"
    window: int | None = None


@dataclass(frozen=True)
class ModelShape:
    layers: tuple[Layer, ...]
    kv_heads: int
    head_dim: int
    mla_dim: int | None  # kv_lora_rank + qk_rope_head_dim for MLA models
    dtype: str

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape:
        cfg = config.get("text_config") or config
        try:
            num_layers = int(cfg["num_hidden_layers"])
            heads = int(cfg["num_attention_heads"])
        except KeyError as exc:
            raise ConfigError(f"model config lacks {exc.args[0]!r}") from None
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or cfg["hidden_size"] // heads)
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or "bfloat16")
        mla_dim = None
        if cfg.get("kv_lora_rank"):
            mla_dim = int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 0)
            return cls(tuple(Layer("mla") for _ in range(num_layers)), kv_heads, head_dim, mla_dim, dtype)
        window = cfg.get("sliding_window")
        types = cfg.get("layer_types")
        if types:
            layers = tuple(
                Layer("sliding", int(window)) if t == "sliding_attention" and window else Layer("full")
                for t in types[:num_layers]
            )
        elif window and (cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")):
            pattern = int(cfg.get("sliding_window_pattern") or cfg["_sliding_window_pattern"])
            layers = tuple(
                Layer("full") if (i + 1) % pattern == 0 else Layer("sliding", int(window)) for i in range(num_layers)
            )
        elif window and cfg.get("use_sliding_window", False):
            layers = tuple(Layer("sliding", int(window)) for _ in range(num_layers))
        else:
            layers = tuple(Layer("full") for _ in range(num_layers))
        return cls(layers, kv_heads, head_dim, None, dtype)


@dataclass(frozen=True)
class Deployment:
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    layer_split: tuple[int, ...] | None = None
    kv_cache_dtype: str = "auto"
    block_size: int = 16
    max_model_len: int = 8192
    max_num_batched_tokens: int = 2048
    kv_bytes_per_gpu: int = 0
    num_blocks_override: int | None = None
    # batches the engine keeps in flight at once (vLLM's `max_concurrent_batches`); None: one per
    # pipeline stage (synchronous scheduling). vLLM on a GPU with async scheduling: stages + 1.
    concurrent_batches: int | None = None

    @property
    def batches_in_flight(self) -> int:
        return self.concurrent_batches or self.pipeline_parallel


@dataclass
class StagePlan:
    stage: int
    layers: int
    page_bytes_per_layer: int
    block_bytes: int
    num_blocks: int
    blocks_per_request: int
    groups: list[str] = field(default_factory=list)


@dataclass
class KVPlan:
    bytes_per_token_per_gpu: float
    stages: list[StagePlan]
    kv_cache_tokens: int
    max_concurrency: float
    max_model_len: int
    block_size: int = 16
    in_flight_tokens: int = 2048  # vLLM's max_in_flight_tokens: batch budget x batches in flight
    concurrent_batches: int = 1

    def cpu_tier_tokens(self, offload_gib: float, tensor_parallel: int) -> int:
        """Tokens a CPU tier of `offload_gib` GiB holds (vLLM's --kv-offloading-size is summed over the TP
        ranks, each keeping its share of a token: bytes per token per GPU x TP a token)."""
        return int(offload_gib * GIB // (self.bytes_per_token_per_gpu * tensor_parallel))

    @property
    def theoretical_full_windows(self) -> float:
        return self.kv_cache_tokens / self.max_model_len

    def sessions_fitting(self, input_tokens: int, block_size: int | None = None, growth_tokens: int = 0) -> int:
        """Sessions of `input_tokens` prompt tokens, started together and each grown by `growth_tokens`
        generated tokens, that every stage holds at once (theory). Both of vLLM's conditions:

        - held: a decoding session holds, per full-attention group, cdiv(L + growth, block) blocks, and
          per sliding-window group only the blocks spanning its last window - 1 tokens and one new token
          per batch in flight (out-of-window blocks are freed as it advances), at most cdiv(span - 1,
          block) + 1 and never more than the full count: N x held(L + growth) <= blocks;
        - admission: vLLM admits a waiting request only when its whole prompt fits the free blocks in
          every group (`scheduler_reserve_full_isl`, on by default), min(cdiv(L, block), the group's
          per-request cap) blocks a group, so a sliding group needs the whole prompt too; the last of N
          sessions is admitted beside N - 1 that hold held(L): (N - 1) x held(L) + admit(L) <= blocks.
        """
        block = block_size or self.block_size
        prompt = min(input_tokens, self.max_model_len)
        length = min(input_tokens + growth_tokens, self.max_model_len)
        fits = []
        for stage in self.stages:
            held_now = _blocks_held(stage.groups, prompt, block, self.concurrent_batches)
            held_later = _blocks_held(stage.groups, length, block, self.concurrent_batches)
            admit = _blocks_to_admit(stage.groups, prompt, block, self.in_flight_tokens, self.max_model_len)
            if not held_later or stage.num_blocks < admit:
                fits.append(0)
                continue
            fits.append(min(stage.num_blocks // held_later, 1 + (stage.num_blocks - admit) // held_now))
        return min(fits)


def _window(group: str) -> int | None:
    return int(group.split(":", 1)[1]) if group.startswith("sliding:") else None


def _over_groups(groups: list[str], full: int, sliding: Callable[[int], int]) -> int:
    """Blocks summed over a rank's groups: `full` for each full-attention group, `sliding(window)` for
    each sliding one. The three counts below differ only in what a sliding group takes."""
    return sum(full if (window := _window(group)) is None else sliding(window) for group in groups)


def _blocks_per_request(groups: list[str], length: int, block_size: int, in_flight: int) -> int:
    """vLLM's startup sizing of one request (`max_memory_usage_bytes`), in blocks over all groups."""
    return _over_groups(
        groups,
        math.ceil(length / block_size),
        lambda window: math.ceil(min(window - 1 + in_flight, length) / block_size) + 1,
    )


def _blocks_held(groups: list[str], length: int, block_size: int, batches: int) -> int:
    """Blocks a decoding session of `length` tokens holds over all groups: in a sliding group the visible
    window plus one new token per batch in flight, at most the full count."""
    full = math.ceil(length / block_size)
    return _over_groups(groups, full, lambda window: min(full, math.ceil((window - 2 + batches) / block_size) + 1))


def _blocks_to_admit(groups: list[str], prompt: int, block_size: int, in_flight: int, max_model_len: int) -> int:
    """Free blocks vLLM's admission gate asks of a new request of `prompt` tokens, over all groups."""
    full = math.ceil(prompt / block_size)
    return _over_groups(
        groups, full, lambda window: min(full, math.ceil(min(window - 1 + in_flight, max_model_len) / block_size) + 1)
    )


def plan_kv(shape: ModelShape, dep: Deployment) -> KVPlan:
    if dep.kv_bytes_per_gpu <= 0 and dep.num_blocks_override is None:
        raise ConfigError("the KV budget per GPU must be known (a profile budget or an engine's startup log)")
    nbytes = dtype_bytes(dep.kv_cache_dtype, shape.dtype)
    split = list(dep.layer_split) if dep.layer_split else _even_split(len(shape.layers), dep.pipeline_parallel)
    if sum(split) != len(shape.layers) or len(split) != dep.pipeline_parallel:
        raise ConfigError(
            f"layer split {split} does not cover {len(shape.layers)} layers in {dep.pipeline_parallel} stages"
        )
    in_flight = dep.max_num_batched_tokens * dep.batches_in_flight  # vLLM's max_in_flight_tokens
    stages: list[StagePlan] = []
    start = 0
    for index, count in enumerate(split):
        layers = shape.layers[start : start + count]
        start += count
        if shape.mla_dim is not None and dep.kv_cache_dtype == "fp8_ds_mla":
            page = dep.block_size * FP8_DS_MLA_BYTES_PER_TOKEN
        elif shape.mla_dim is not None:
            page = dep.block_size * shape.mla_dim * nbytes
        else:
            heads = max(1, shape.kv_heads // dep.tensor_parallel)
            page = 2 * dep.block_size * heads * shape.head_dim * nbytes
        buckets: dict[str, int] = {}
        for layer in layers:
            key = f"sliding:{layer.window}" if layer.kind == "sliding" else layer.kind
            buckets[key] = buckets.get(key, 0) + 1
        if len(buckets) == 1:
            group_size = count
            groups = list(buckets)
        else:
            smallest, largest = min(buckets.values()), max(buckets.values())
            group_size = largest if largest < smallest * 1.5 else smallest
            groups = [key for key, n in buckets.items() for _ in range(math.ceil(n / group_size))]
        block_bytes = page * group_size
        num_blocks = dep.num_blocks_override or dep.kv_bytes_per_gpu // block_bytes
        per_request = _blocks_per_request(groups, dep.max_model_len, dep.block_size, in_flight)
        stages.append(StagePlan(index, count, page, block_bytes, num_blocks, per_request, groups))
    concurrency = min(s.num_blocks / s.blocks_per_request for s in stages)
    bytes_per_token = sum(s.page_bytes_per_layer * s.layers for s in stages) / dep.block_size / len(stages)
    return KVPlan(
        bytes_per_token,
        stages,
        int(concurrency * dep.max_model_len),
        concurrency,
        dep.max_model_len,
        block_size=dep.block_size,
        in_flight_tokens=in_flight,
        concurrent_batches=dep.batches_in_flight,
    )


def _even_split(num_layers: int, stages: int) -> list[int]:
    base, extra = divmod(num_layers, stages)
    return [base + (1 if i < extra else 0) for i in range(stages)]
