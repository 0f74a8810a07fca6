"""Profile: what to deploy, read from TOML.

A profile names the engine, the model and how it is served. Issue-sized growth (parallelism, KV
cache, speculative decoding) lands here as more sections; every packaged profile is validated by a test.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from loadproof.config.base import StrictModel, one_line
from loadproof.errors import ConfigError


class ModelSpec(StrictModel):
    path: str = Field(description="model folder or hub id; `embedded:<name>` for a model loadproof prepares")
    served_name: str = Field(description="the name clients send in `model`")
    dtype: str = "auto"
    max_model_len: int = Field(ge=16, description="context window in tokens")
    tokenizer: str | None = Field(default=None, description="tokenizer folder or tokenizer.json, if not the model's")


class ServingSpec(StrictModel):
    endpoint: Literal["completions", "chat"] = Field(
        default="chat", description="the API the scenarios use; base models want completions"
    )
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535, description="None picks a free port")
    enforce_eager: bool = Field(default=False, description="skip graph compilation: faster start, slower decode")
    thinking: Literal["unsupported", "disable"] = Field(
        default="unsupported", description="`disable` sends chat_template_kwargs.enable_thinking=false"
    )
    ready_timeout_s: float = Field(default=900.0, gt=0, description="bound on model load and warm-up")
    extra_args: list[str] = Field(default_factory=list, description="passed to the engine as they are")
    env: dict[str, str] = Field(default_factory=dict, description="environment for the engine process")


class Profile(StrictModel):
    name: str
    engine: Literal["vllm", "embedded"]
    model: ModelSpec
    serving: ServingSpec = Field(default_factory=ServingSpec)


def load_profile(path: Path) -> Profile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"profile not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return parse_profile(data, str(path))


def parse_profile(data: dict, source: str) -> Profile:
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise one_line(exc, source) from None


def packaged_profiles() -> dict[str, str]:
    """Name -> TOML text of every profile shipped in the package."""
    root = resources.files("loadproof") / "profiles"
    return {p.name.removesuffix(".toml"): p.read_text(encoding="utf-8") for p in root.iterdir() if p.name.endswith(".toml")}


def packaged_profile(name: str) -> Profile:
    profiles = packaged_profiles()
    if name not in profiles:
        raise ConfigError(f"no packaged profile {name!r}; packaged: {', '.join(sorted(profiles))}")
    return parse_profile(tomllib.loads(profiles[name]), f"packaged profile {name}")
