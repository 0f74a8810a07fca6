"""Profile: what to deploy, read from TOML.

A profile names the engine, the model and how it is served. Issue-sized growth (parallelism, KV
cache, speculative decoding) lands here as more sections; every packaged profile is validated by a test.

Every command that takes a profile takes a file or a packaged profile's name (`src/loadproof/profiles/NAME.toml`;
`loadproof profiles` lists them): `resolve_profile` is the one place that decides which, an existing file first.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from loadproof.config.base import StrictModel, one_line
from loadproof.config.replicas import ReplicasSpec, check_fleet_ports
from loadproof.errors import ConfigError
from loadproof.protocol.media import MediaTokens
from loadproof.protocol.routes import ROUTES, route_names, route_of


class ModelSpec(StrictModel):
    path: str = Field(description="model folder or hub id; `embedded:<name>` for a model loadproof prepares")
    served_name: str = Field(description="the name clients send in `model`")
    dtype: str = "auto"
    quantization: str | None = Field(default=None, description="e.g. fp8, awq, compressed-tensors")
    revision: str | None = Field(default=None, description="hub revision (commit) to pin")
    load_format: str | None = Field(default=None, description="e.g. dummy: random weights of the right shape")
    max_model_len: int = Field(ge=16, description="context window in tokens")
    tokenizer: str | None = Field(default=None, description="tokenizer folder or tokenizer.json, if not the model's")
    image_tokens: str | None = Field(
        default=None,
        description="the prompt tokens the served model spends on an image, as protocol.media.MediaTokens reads "
        "a rule (fixed:N or patches:P, each with an optional +K of markers), e.g. fixed:64+3: what `run load "
        "--media-tokens` takes; None: not stated",
    )
    audio_tokens: str | None = Field(
        default=None, description="the same for audio: per_s:R (+K), e.g. per_s:50; None: not stated"
    )

    @field_validator("image_tokens", "audio_tokens")
    @classmethod
    def _media_rule(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is None:
            return text
        rule = MediaTokens.parse(text)  # MediaError (a ValueError) names the rule and the forms
        audio = info.field_name == "audio_tokens"
        if (rule.kind == "per_s") != audio:
            raise ValueError(f"{text!r}: give {'per_s:R' if audio else 'fixed:N or patches:P'}")
        return text


class ServingSpec(StrictModel):
    endpoint: str = Field(
        default="chat",
        description="the route the scenarios use (`protocol.routes`: completions, chat, responses, messages, "
        "embeddings, rerank, transcriptions); base models want completions, pooling models embeddings or rerank",
    )
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535, description="None picks a free port")
    enforce_eager: bool = Field(default=False, description="skip graph compilation: faster start, slower decode")
    thinking: Literal["unsupported", "disable"] = Field(
        default="unsupported", description="`disable` sends chat_template_kwargs.enable_thinking=false"
    )
    ready_timeout_s: float = Field(default=900.0, gt=0, description="bound on model load and warm-up")
    python: str = Field(default="python3", description="the interpreter that has the engine installed")
    extra_args: list[str] = Field(default_factory=list, description="passed to the engine as they are")
    env: dict[str, str] = Field(default_factory=dict, description="environment for the engine process")
    runner: Literal["generate", "pooling"] = Field(
        default="generate",
        description="pooling: serve the model as an embedding model (vLLM's --runner pooling, "
        "SGLang's --is-embedding), measured on the embeddings endpoint",
    )

    @model_validator(mode="after")
    def _runner_endpoint(self) -> ServingSpec:
        if self.endpoint not in ROUTES:
            raise ValueError(f"endpoint = {self.endpoint!r}: not a route ({', '.join(route_names())})")
        if (self.runner == "pooling") != route_of(self.endpoint).pooling:
            raise ValueError(
                f"runner = {self.runner!r} with endpoint = {self.endpoint!r}: a pooling model is "
                "measured on the embeddings or rerank endpoint, and only a pooling model serves them"
            )
        return self


class ParallelSpec(StrictModel):
    tensor: int = Field(default=1, ge=1, description="tensor-parallel ranks per pipeline stage")
    pipeline: int = Field(default=1, ge=1, description="pipeline stages")
    layer_split: list[int] | None = Field(default=None, description="layers per pipeline stage, e.g. [20, 20]")
    nodes: int = Field(default=1, ge=1, description="hosts; more than one runs vLLM on a Ray cluster")
    head_address: str = Field(default="HEAD_NODE_IP", description="the Ray head's address, for multi-node")

    @model_validator(mode="after")
    def _split_matches(self) -> ParallelSpec:
        if self.layer_split is not None and len(self.layer_split) != self.pipeline:
            raise ValueError(f"layer_split has {len(self.layer_split)} stages, pipeline is {self.pipeline}")
        if (self.tensor * self.pipeline) % self.nodes:
            raise ValueError(f"{self.tensor * self.pipeline} GPUs do not divide evenly over {self.nodes} nodes")
        return self

    @property
    def gpus(self) -> int:
        return self.tensor * self.pipeline


class KVCacheSpec(StrictModel):
    dtype: str = Field(default="auto", description="auto (the model's dtype), fp8, fp8_e4m3, ...")
    block_size: int | None = Field(default=None, ge=1, description="tokens per block; default: the engine's")
    budget_gib_per_gpu: float | None = Field(
        default=None,
        gt=0,
        description="KV memory per GPU (vLLM --kv-cache-memory-bytes; VLLM_CPU_KVCACHE_SPACE on CPU)",
    )
    memory_utilization: float | None = Field(default=None, gt=0, le=1, description="vLLM --gpu-memory-utilization")
    num_blocks_override: int | None = Field(default=None, ge=1, description="vLLM --num-gpu-blocks-override")
    offload_gib: float | None = Field(
        default=None,
        gt=0,
        description="a CPU tier: KV cache offloaded to host "
        "memory, GiB in all (vLLM --kv-offloading-size, summed over TP ranks)",
    )
    offload_backend: Literal["native", "lmcache"] = Field(
        default="native", description="the CPU tier's backend (vLLM --kv-offloading-backend)"
    )


class SchedulerSpec(StrictModel):
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1, description="chunked-prefill token budget")
    long_prefill_token_threshold: int | None = Field(
        default=None,
        ge=0,
        description="vLLM: the most tokens a "
        "prompt prefills in one step while others share the engine "
        "(0: no cap); budget / T long prompts then prefill at once",
    )
    max_num_partial_prefills: int | None = Field(
        default=None,
        ge=1,
        description="vLLM: above 1, the threshold's default becomes 4% of max_model_len (0.26; 0.32 refuses it)",
    )

    def long_prefill_threshold(self, max_model_len: int) -> int:
        """vLLM's long_prefill_token_threshold as this sets it: given, else 4% of max_model_len when
        max_num_partial_prefills > 1 (0.26's config/scheduler.py), else 0 (no cap)."""
        if self.long_prefill_token_threshold is not None:
            return self.long_prefill_token_threshold
        if (self.max_num_partial_prefills or 1) > 1:
            return int(max_model_len * 0.04)
        return 0


class SpeculativeSpec(StrictModel):
    method: str = Field(description="e.g. eagle, eagle3, mtp, ngram, draft_model")
    model: str | None = Field(default=None, description="draft model, where the method needs one")
    draft_tokens: int = Field(ge=1, description="tokens drafted per step (with a schedule: the most it drafts)")
    draft_schedule: dict[str, int] | None = Field(
        default=None,
        description='draft length by batch size, inclusive ranges from 1, e.g. {"1-4": 5, "5-32": 3} '
        "(a batch larger than the last range keeps its length); not every engine has it",
    )

    @field_validator("draft_schedule")
    @classmethod
    def _schedule(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is not None:
            schedule_ranges(value)  # its ValueError says what is wrong
        return value

    @model_validator(mode="after")
    def _within_draft_tokens(self) -> SpeculativeSpec:
        longest = max((k for _, _, k in self.schedule), default=0)
        if longest > self.draft_tokens:
            raise ValueError(
                f"draft_schedule asks for {longest} draft tokens, more than draft_tokens "
                f"({self.draft_tokens}), the most the engine is set up to draft"
            )
        return self

    @property
    def schedule(self) -> list[tuple[int, int, int]]:
        """The schedule as (first batch size, last batch size, draft length), in order; empty without one."""
        return schedule_ranges(self.draft_schedule) if self.draft_schedule else []

    def draft_length(self, batch_size: int) -> int:
        """The draft length a batch of this many sequences runs with (the last range's beyond the schedule)."""
        for first, last, length in self.schedule:
            if first <= batch_size <= last:
                return length
        return self.schedule[-1][2] if self.schedule and batch_size > self.schedule[-1][1] else self.draft_tokens


def schedule_ranges(schedule: dict[str, int]) -> list[tuple[int, int, int]]:
    """'A-B' (or 'A') -> K, as (A, B, K) in order; ValueError unless the ranges start at 1 and neither
    overlap nor leave a gap, and every K is at least 0 (0: no drafts at that batch size)."""
    if not schedule:
        raise ValueError("draft_schedule is empty")
    ranges = []
    for key, length in schedule.items():
        first, _, last = key.partition("-")
        if not (first.strip().isdigit() and (last.strip().isdigit() or not _)):
            raise ValueError(f"draft_schedule key {key!r} is not a batch-size range such as '1-4' or '5'")
        a, b = int(first), int(last) if _ else int(first)
        if a < 1 or b < a:
            raise ValueError(f"draft_schedule range {key!r} must run from a batch size of at least 1 upwards")
        if length < 0:
            raise ValueError(f"draft_schedule[{key!r}] = {length}: a draft length is 0 or more")
        ranges.append((a, b, length))
    ranges.sort()
    if ranges[0][0] != 1:
        raise ValueError(f"draft_schedule must start at batch size 1 (it starts at {ranges[0][0]})")
    for (a, b, _k), (c, _d, _l) in zip(ranges, ranges[1:]):
        if c != b + 1:
            raise ValueError(f"draft_schedule ranges {a}-{b} and {c}-{_d} " + ("overlap" if c <= b else "leave a gap"))
    return ranges


class LoraSpec(StrictModel):
    """LoRA adapters served beside the base model, each by its name (what a request's `model` asks for)."""

    adapters: dict[str, str] = Field(
        description="name -> the adapter's folder (adapter_config.json and its "
        'weights), e.g. { support = "/adapters/support" }'
    )
    max_loras: int = Field(
        default=1,
        ge=1,
        description="adapters one batch may hold at once (vLLM --max-loras; SGLang --max-loras-per-batch)",
    )
    max_lora_rank: int = Field(default=16, ge=1, description="the largest rank of an adapter (--max-lora-rank)")
    max_cpu_loras: int | None = Field(
        default=None,
        ge=1,
        description="adapters kept in host memory, the rest "
        "loaded from their folder when asked for (vLLM --max-cpu-loras)",
    )

    @model_validator(mode="after")
    def _sane(self) -> LoraSpec:
        if not self.adapters:
            raise ValueError("lora.adapters names no adapter")
        bad = [name for name in self.adapters if not name or any(c in name for c in " =,")]
        if bad:
            raise ValueError(f"lora.adapters: {bad[0]!r} is no adapter name (no spaces, '=' or ',')")
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(
                f"lora.max_cpu_loras ({self.max_cpu_loras}) is less than lora.max_loras ({self.max_loras})"
            )
        return self


class RoleSpec(StrictModel):
    """One instance of a disaggregated pair: what it changes of the profile's settings."""

    port: int | None = Field(default=None, ge=1, le=65535, description="None picks a free port")
    gpus: str | None = Field(
        default=None,
        description='CUDA_VISIBLE_DEVICES for this instance, e.g. "1"; '
        "None: the same GPUs as the other (two instances on one GPU)",
    )
    budget_gib_per_gpu: float | None = Field(default=None, gt=0, description="its KV memory per GPU")
    memory_utilization: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="its --gpu-memory-utilization (two instances on one GPU: each at most half)",
    )
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    extra_args: list[str] = Field(default_factory=list, description="more engine arguments for this instance")


class DisaggregationSpec(StrictModel):
    """Prefill and decode on two instances joined by a KV connector; `serve` starts both and the relay routes
    each request to the prefill instance (one token) and then to the decode instance (relay.prefill)."""

    connector: Literal["ExampleConnector", "NixlConnector"] = Field(
        default="ExampleConnector",
        description="vLLM's KV connector: ExampleConnector (a shared folder; two instances "
        "on one GPU) or NixlConnector (GPU to GPU; needs the nixl package)",
    )
    storage_path: str | None = Field(
        default=None,
        description="ExampleConnector's shared folder (a tmpfs such as "
        "/dev/shm/...: every prompt's KV cache is written there and never deleted)",
    )
    prefill: RoleSpec = Field(default_factory=RoleSpec)
    decode: RoleSpec = Field(default_factory=RoleSpec)

    @model_validator(mode="after")
    def _storage(self) -> DisaggregationSpec:
        if (self.connector == "ExampleConnector") != (self.storage_path is not None):
            raise ValueError(
                "disaggregation.storage_path is ExampleConnector's shared folder: give it with that "
                "connector and only with it"
            )
        return self


class CudaGraphSpec(StrictModel):
    capture_sizes: list[int] | None = Field(default=None, description="decode batch sizes to capture")
    max_capture_size: int | None = Field(default=None, ge=1)


class Profile(StrictModel):
    name: str
    engine: Literal["vllm", "embedded", "sglang", "sim"]  # the engine registry's kinds (engines/__init__.py)
    description: str = ""
    model: ModelSpec
    serving: ServingSpec = Field(default_factory=ServingSpec)
    parallel: ParallelSpec = Field(default_factory=ParallelSpec)
    kv_cache: KVCacheSpec = Field(default_factory=KVCacheSpec)
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    speculative: SpeculativeSpec | None = None
    lora: LoraSpec | None = None
    cuda_graphs: CudaGraphSpec = Field(default_factory=CudaGraphSpec)
    cpu_offload_gib: float | None = Field(default=None, gt=0, description="weights offloaded to host memory per GPU")
    disaggregation: DisaggregationSpec | None = None
    replicas: ReplicasSpec | None = Field(default=None, description="N instances behind a router (config/replicas.py)")

    @model_validator(mode="after")
    def _pair(self) -> Profile:
        if self.disaggregation is not None and (self.serving.runner != "generate" or self.parallel.nodes > 1):
            raise ValueError("[disaggregation] serves a generating model on one host")
        if self.replicas is not None:
            if self.disaggregation is not None:
                raise ValueError("[replicas] and [disaggregation] do not go together: a fleet of plain instances")
            if self.parallel.nodes > 1:
                raise ValueError("[replicas] runs its instances on one host: parallel.nodes must be 1")
            check_fleet_ports(self.replicas, self.serving.port)
        return self


def load_profile(path: Path) -> Profile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"profile not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_profile(data, str(path))


def parse_profile(data: dict[str, Any], source: str) -> Profile:
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise one_line(exc, source) from None


PACKAGED = "packaged:"  # model.path of a model the package ships (`packaged_model`)


def _profiles_folder() -> Any:
    return resources.files("loadproof") / "profiles"


def packaged_profiles() -> dict[str, str]:
    """Name -> TOML text of every profile shipped in the package."""
    return {
        p.name.removesuffix(".toml"): p.read_text(encoding="utf-8")
        for p in _profiles_folder().iterdir()
        if p.name.endswith(".toml")
    }


def packaged_profile(name: str) -> Profile:
    profiles = packaged_profiles()
    if name not in profiles:
        raise ConfigError(f"no packaged profile {name!r}; packaged: {', '.join(sorted(profiles))}")
    return parse_profile(tomllib.loads(profiles[name]), f"packaged profile {name}")


def packaged_listing() -> list[tuple[str, str]]:
    """(name, description) of every packaged profile, by name: what `loadproof profiles` prints."""
    return [(name, packaged_profile(name).description) for name in sorted(packaged_profiles())]


def resolve_profile_path(text: str | Path) -> Path:
    """The file of a profile named on the command line: an existing file wins, else the packaged profile of
    that name, else one ConfigError line that lists the packaged names."""
    path = Path(text)
    if path.is_file():
        return path
    names = sorted(packaged_profiles())
    if str(text) in names:
        return Path(str(_profiles_folder() / f"{text}.toml"))
    raise ConfigError(
        f"profile not found: {text} (not a file, and not a packaged profile: {', '.join(names)}; "
        "see loadproof profiles)"
    )


def resolve_profile(text: str | Path) -> Profile:
    """A profile named on the command line, read and validated: a file's path, or a packaged profile's name
    (`resolve_profile_path`)."""
    path = resolve_profile_path(text)
    return load_profile(path) if Path(text).is_file() else packaged_profile(str(text))


def packaged_model(name: str) -> Path:
    """`model.path = "packaged:NAME"`: a model the package ships, either a model shape's folder
    (`data/models/NAME`, its config.json only, for `load_format = "dummy"`) or a sim profile
    (`data/sim/NAME.toml`, the model of a profile whose engine is the simulator)."""
    data = resources.files("loadproof") / "data"
    if name and "/" not in name and not name.startswith("."):
        if (data / "models" / name / "config.json").is_file():
            return Path(str(data / "models" / name))
        if (data / "sim" / f"{name}.toml").is_file():
            return Path(str(data / "sim" / f"{name}.toml"))
    raise ConfigError(
        f"no packaged model {name!r}: neither a model shape (loadproof/data/models) nor a sim profile "
        "(loadproof/data/sim)"
    )
