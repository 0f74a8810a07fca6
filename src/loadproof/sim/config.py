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

from pydantic import Field, ValidationError

from loadproof.config.base import StrictModel, one_line
from loadproof.errors import UsageError


class CostModel(StrictModel):
    """Modeled duration of one engine step (one forward pass over the scheduled tokens).

    step_s = step_overhead_s
           + prefill_s_per_token * prefill tokens
           + prefill_s_per_token_ctx * sum over prefill chunks of n * (c0 + n / 2)   (attention over the
             context already computed, c0, plus the chunk itself)
           + decode_s_per_seq * decoding sequences
           + decode_s_per_ctx_token * sum of the decoding sequences' context lengths
    A single cold prompt of L tokens in chunks of B therefore waits
    request_overhead_s + ceil(L / B) * step_overhead_s + prefill_s_per_token * L + prefill_s_per_token_ctx * L^2 / 2.
    """

    step_overhead_s: float = Field(default=0.02, ge=0)
    prefill_s_per_token: float = Field(default=1e-3, ge=0)
    prefill_s_per_token_ctx: float = Field(default=0.0, ge=0)
    decode_s_per_seq: float = Field(default=1e-3, ge=0)
    decode_s_per_ctx_token: float = Field(default=0.0, ge=0)
    request_overhead_s: float = Field(default=0.0, ge=0, description="HTTP, tokenization, first scheduling")

    def step_s(self, prefill_chunks: list[tuple[int, int]], decode_contexts: list[int]) -> float:
        prefill_tokens = sum(n for _, n in prefill_chunks)
        attention = sum(n * (c0 + n / 2) for c0, n in prefill_chunks)
        return (self.step_overhead_s + self.prefill_s_per_token * prefill_tokens
                + self.prefill_s_per_token_ctx * attention
                + self.decode_s_per_seq * len(decode_contexts)
                + self.decode_s_per_ctx_token * sum(decode_contexts))


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


class SimConfig(StrictModel):
    model: str = "sim"
    max_model_len: int = Field(default=32_768, ge=16)
    block_size: int = Field(default=16, ge=1)
    num_gpu_blocks: int = Field(default=8_192, ge=1, description="KV budget in blocks of block_size tokens")
    max_num_seqs: int = Field(default=256, ge=1)
    max_num_batched_tokens: int = Field(default=2_048, ge=1, description="per-step token budget")
    long_prefill_token_threshold: int = Field(default=0, ge=0, description="0: a prefill chunk may take the whole budget")
    reserve_full_sequence: bool = Field(default=True, description="admit a waiting request only when its whole "
                                        "prompt fits (vLLM's scheduler_reserve_full_isl, default since 2026)")
    enable_prefix_caching: bool = True
    cost: CostModel = Field(default_factory=CostModel)
    time_scale: float = Field(default=1.0, gt=0, description="modeled seconds per wall second when serving")
    load_s: float = Field(default=0.0, ge=0, description="seconds before the server listens, as an engine "
                          "loading its weights (wall seconds: load_s / time_scale)")
    seed: int = 0
    faults: FaultConfig = Field(default_factory=FaultConfig)
    source: str = Field(default="defaults", description="where these figures came from (calibration inputs)")

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
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.suffix != ".json" else json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "cost" in data and "model" not in data or (
        isinstance(data, dict) and isinstance(data.get("model"), str))
