"""What every scenario shares: the target it talks to, and the run it records into."""

from __future__ import annotations

import json
import platform
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from loadproof.config.base import StrictModel
from loadproof.errors import EnvironmentFailure, UsageError
from loadproof.protocol.openai import Endpoint
from loadproof.records import RequestRecord
from loadproof.telemetry.server_metrics import MetricsSource

if TYPE_CHECKING:
    from loadproof.scenarios.lifecycle import Console, Setup


@dataclass(frozen=True)
class Target:
    """An OpenAI-compatible server and how to talk to it: where requests go (`url`), where the engine's
    metrics come from (`metrics`: the engine's /metrics beside `url` unless told otherwise, e.g. a relay's
    `/engine/metrics` or a Prometheus server), and where the tokens a planned prompt length counts come
    from (`token_counts`)."""

    url: str
    model: str
    endpoint: Endpoint
    api_key: str | None = field(default=None, repr=False)
    extra_body: dict[str, Any] = field(default_factory=dict)
    tokenizer_path: Path | None = None
    engine: str = "vllm"  # the engine registry's kind: whose /metrics names to read (the profile's, when given)
    metrics: MetricsSource = None  # type: ignore[assignment]  # None: `url`'s /metrics
    token_counts: TokenCounts = "engine"

    def __post_init__(self) -> None:
        if self.metrics is None:
            object.__setattr__(self, "metrics", MetricsSource.beside(self.url))

    @property
    def metrics_api_key(self) -> str | None:
        """The API key, for a metrics source served where the API is (a relay's `/engine/metrics` takes the
        key its API takes); never for a source elsewhere, such as a Prometheus server."""
        return self.api_key if self.metrics.same_origin(self.url) else None

    def describe(self) -> dict[str, Any]:
        """For the manifest. The key is never written, only whether one was used."""
        return {
            "url": self.url,
            "model": self.model,
            "endpoint": self.endpoint,
            "api_key_used": bool(self.api_key),
            "extra_body": self.extra_body,
            "tokenizer": str(self.tokenizer_path) if self.tokenizer_path else None,
            "metrics": self.metrics.describe(),
            "token_counts": self.token_counts,
        }


@dataclass(frozen=True)
class TokenizerUse:
    """Whether a scenario needs the model's tokenizer (`--tokenizer`), and what for."""

    required: bool
    purpose: str


class NoCommandOptions(StrictModel):
    """A scenario whose command has no options beyond its Options and the target's."""


class Scenario:
    """What every scenario declares, and how a run command builds it (`scenarios.lifecycle`).

    - `name`, `Options` (a StrictModel: every field is an option of `loadproof run NAME`, see
      `scenarios.options`), `summary` (the command's help);
    - `CommandOptions`: options of the command that are not options of a run (a search, a log to read);
    - `tokenizer`: whether `--tokenizer` is required, optional or not offered;
    - `failure`: the line a FAIL verdict ends with;
    - `async run(writer, manifest, live)`: one run, recorded into `writer`, keeping `live` (a
      `scenarios.live.LiveStatus`) up to date for the console;
    - `prepare(setup)`: the scenario for a resolved command; `perform(setup, console)`: the command.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[StrictModel]]
    CommandOptions: ClassVar[type[StrictModel]] = NoCommandOptions
    summary: ClassVar[str] = ""
    tokenizer: ClassVar[TokenizerUse | None] = None
    failure: ClassVar[str] = "see the criteria above"

    def __init__(self, target: Target, options: Any) -> None:
        self.target = target
        self.options = options
        self.status: Callable[[str], None] = lambda text: None  # the lifecycle prints these lines

    @classmethod
    def prepare(cls, setup: Setup, console: Console) -> Scenario:
        """The scenario a resolved command runs (a subclass adds what its command options give)."""
        return cls(setup.target, setup.options)

    @classmethod
    def perform(cls, setup: Setup, console: Console) -> None:
        """The command: one run, reported, its verdict turned into the exit code."""
        from loadproof.scenarios.lifecycle import conclude, run_once

        scenario = cls.prepare(setup, console)
        conclude(run_once(scenario, setup.out, console, setup.manifest_extra), cls.failure)


def resolve_model(url: str, model: str | None, api_key: str | None = None) -> str:
    """Check the server answers and serves `model`; without one, take the first it lists."""
    data = _get_json(url.rstrip("/") + "/v1/models", api_key)
    models = [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]
    if model is not None:
        if model not in models:
            raise UsageError(f"{url} does not serve model {model!r}; it serves: {', '.join(models) or 'nothing'}")
        return model
    if not models:
        raise UsageError(f"{url} lists no models at /v1/models; pass --model")
    return models[0]


def model_info(url: str, model: str, api_key: str | None = None) -> dict[str, Any]:
    """The server's /v1/models entry for `model` (vLLM includes `max_model_len`)."""
    data = _get_json(url.rstrip("/") + "/v1/models", api_key)
    for entry in data.get("data", []):
        if isinstance(entry, dict) and entry.get("id") == model:
            return entry
    raise UsageError(f"{url} does not serve model {model!r}")


def engine_version(url: str, api_key: str | None = None) -> str | None:
    try:
        return str(_get_json(url.rstrip("/") + "/version", api_key).get("version"))
    except (UsageError, EnvironmentFailure):
        return None


def _get_json(url: str, api_key: str | None) -> dict[str, Any]:
    try:
        request = urllib.request.Request(url)
        if api_key:
            request.add_header("Authorization", f"Bearer {api_key}")
        with urllib.request.urlopen(request, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise UsageError(f"{url} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise EnvironmentFailure(f"cannot reach {url}: {getattr(exc, 'reason', exc)}") from None
    except json.JSONDecodeError:
        raise UsageError(f"{url} did not answer JSON") from None
    except ValueError:  # urllib's "unknown url type": a URL that did not come through the options' check
        raise UsageError(f"{url}: not an http(s) URL") from None


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("loadproof", "aiohttp", "msgspec", "pydantic", "tokenizers"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def git_hash() -> str | None:
    """The commit of the loadproof source tree, when it runs from a checkout."""
    here = Path(__file__).resolve().parent
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                           capture_output=True, text=True, timeout=5).stdout.strip()
    return result.stdout.strip() + ("-dirty" if dirty else "")


def common_manifest(run_id: str, scenario: str, options: Any, target: Target,
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The manifest fields every scenario writes before its first request."""
    return {
        "run_id": run_id,
        "scenario": scenario,
        "options": options.model_dump(),
        "target": target.describe(),
        "engine_version": engine_version(target.url, target.api_key),
        "versions": versions(),
        "git": git_hash(),
        "start_wall_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "clock_anchor": clock_anchor(),
        **(extra or {}),
    }


def clock_anchor() -> dict[str, int]:
    """One wall-clock reading paired with the monotonic clock, to place record times in real time."""
    return {"wall_time_ns": time.time_ns(), "perf_counter_ns": time.perf_counter_ns()}


class TokenCounter:
    """Counts output tokens with the client-side tokenizer, to set beside the server's usage."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise UsageError(f"no tokenizer.json at {path}")
        self._tok = Tokenizer.from_file(str(file))

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def __call__(self, record: RequestRecord) -> None:
        if record.output_text:
            record.client_output_tokens = self.count(record.output_text)
