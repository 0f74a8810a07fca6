"""The target: the server a run talks to, resolved once per run.

`TargetOptions` are the options every `loadproof run` command shares (checked offline, before anything is
sent; `--engine-metrics` is parsed there, once, into a `MetricsSource`). `resolve_target` turns them into
a `Target` with what the server says about itself, asked once: the model it serves (`/v1/models`: the one
named, or the first listed) with its context length, its version (`/version`), and, for a scenario that
sizes prompts and was given no `--tokenizer`, whether the engine counts tokens for us (its `/tokenize`), and,
for the embeddings endpoint, whether the model embeds (one short input to `/v1/embeddings`).
Every URL a run sends to is built by the Target from its base URL (`url_of`), never glued by hand.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, field_validator, model_validator

from loadproof.config.base import StrictModel
from loadproof.config.profile import Profile
from loadproof.engines import engines
from loadproof.errors import EnvironmentFailure, RequestError, UsageError
from loadproof.protocol.routes import Route, request_of, route_names, route_of
from loadproof.protocol.urls import url_of
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.rundir.manifest import Price
from loadproof.scenarios.options import ExistingPath, HttpUrl, Panel, cli, one_of
from loadproof.telemetry.fleet import Fleet, fleet_of, policy_option, router_option, sources_option
from loadproof.telemetry.fleet_scraper import FleetScraper
from loadproof.telemetry.server_metrics import MetricsScraper, MetricsSource

TokenCounts = Literal["engine", "local"]
Thinking = Literal["off", "low", "on"]
TokenizerSource = Literal["local", "engine"]
TOKENIZE_PROBE = "Archive calibration line."  # a short text in the haystack's words
EMBEDDINGS_PROBE = "Archive calibration line."  # embedded once before an embeddings run: is the endpoint served?


@dataclass(frozen=True)
class Served:
    """What the server said about itself when the target was resolved (nothing, for a target built by hand):
    the model's context length (vLLM lists `max_model_len`), the engine's version, and whether its
    /tokenize counted a probe text (`tokenizes`; else `tokenize_error` says why, where it was asked)."""

    max_model_len: int | None = None
    version: str | None = None
    tokenizes: bool = False
    tokenize_error: str | None = None
    models: tuple[str, ...] = ()  # every id /v1/models listed (a base model, its LoRA adapters, other models)


@dataclass(frozen=True)
class Target:
    """An OpenAI-compatible server and how to talk to it: where requests go (`url`, the base URL, and the
    paths under it: `url_of`), where the engine's metrics come from (`metrics`: the engine's /metrics beside
    `url` unless told otherwise, e.g. a relay's `/engine/metrics` or a Prometheus server), where the tokens a
    planned prompt length counts come from (`token_counts`, and `tokenizer_source`: the model's tokenizer
    here, or the engine's /tokenize), and what the server said about itself (`served`)."""

    url: str
    model: str
    endpoint: str  # the route's name (`protocol.routes`)
    api_key: str | None = field(default=None, repr=False)
    extra_body: dict[str, Any] = field(default_factory=dict)
    tokenizer_path: Path | None = None
    engine: str = "vllm"  # the engine registry's kind: whose /metrics names to read (the profile's, when given)
    metrics: MetricsSource = None  # type: ignore[assignment]  # None: `url`'s /metrics
    token_counts: TokenCounts = "engine"
    served: Served = Served()
    thinking: Thinking | None = None  # the reasoning mode asked (None: the model's default)
    reasoning_effort: str | None = None  # the reasoning effort sent, where one was
    fleet: Fleet | None = None  # replicas behind a router (docs/fleet.md); `metrics` is then replica 0's

    def __post_init__(self) -> None:
        if self.metrics is None:
            object.__setattr__(self, "metrics", MetricsSource.beside(self.url))

    def url_of(self, path: str) -> str:
        """The URL of `path` on this server (a base URL's path prefix kept)."""
        return url_of(self.url, path)

    @property
    def route(self) -> Route:
        """The adapter of the route this target's requests go to."""
        return route_of(self.endpoint)

    @property
    def request_url(self) -> str:
        """Where this target's requests go (the route's path: `/v1/chat/completions`, `/v1/messages`, ...)."""
        return self.url_of(self.route.path)

    @property
    def tokenize_url(self) -> str:
        """The engine's /tokenize (its adapter names the path)."""
        return self.url_of(engines.get(self.engine).tokenize_path)

    @property
    def max_model_len(self) -> int | None:
        return self.served.max_model_len

    @property
    def tokenizer_source(self) -> TokenizerSource | None:
        """Where prompt texts are tokenized: `--tokenizer` here (it always wins), else the engine's
        /tokenize where it answered at resolution, else nowhere."""
        if self.tokenizer_path is not None:
            return "local"
        return "engine" if self.served.tokenizes else None

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
            "tokenizer_source": self.tokenizer_source,
            "metrics": self.metrics.describe(),
            "token_counts": self.token_counts,
            "thinking": self.thinking,
            "reasoning_effort": self.reasoning_effort,
            "fleet": self.fleet.describe() if self.fleet is not None else None,
        }

    def scraper(
        self, names: dict[str, str], *, interval_s: float | None, sink: Callable[[EngineSample], None] | None = None
    ) -> MetricsScraper:
        """The scraper of this target's engine metrics: its one source's, or a fleet's (every replica and the router,
        the fleet's own row in `samples`: `telemetry.fleet_scraper`)."""
        if self.fleet is not None:
            return FleetScraper(self.fleet, names, interval_s=interval_s, sink=sink)
        return MetricsScraper(self.metrics, names, interval_s=interval_s, sink=sink, api_key=self.metrics_api_key)

    def resolve(self, *, tokenize: bool = False) -> Target:
        """This target as its server describes it, asked once: the model checked against /v1/models (an
        empty `model`: the first listed) with its context length, the engine's /version, and, with
        `tokenize` and no `tokenizer_path`, whether its /tokenize counts a probe text. UsageError or
        EnvironmentFailure, one line, when /v1/models does not answer or does not list the model."""
        models_url = self.url_of("/v1/models")
        try:
            listed = fetch_json(models_url, self.api_key)
        except Unanswered as exc:
            if exc.status is None:
                raise EnvironmentFailure(f"cannot reach {models_url}: {exc}") from None
            if exc.status == 200:
                raise UsageError(f"{models_url} did not answer JSON") from None
            raise UsageError(f"{models_url} answered {exc}") from None
        entries = [m for m in (listed.get("data") or []) if isinstance(m, dict)] if isinstance(listed, dict) else []
        names = [str(m.get("id")) for m in entries]
        model = self.model
        if model and model not in names:
            raise UsageError(f"{self.url} does not serve model {model!r}; it serves: {', '.join(names) or 'nothing'}")
        if not model:
            if not names:
                raise UsageError(f"{self.url} lists no models at /v1/models; pass --model")
            model = names[0]
        length = entries[names.index(model)].get("max_model_len")
        served = Served(
            max_model_len=length if isinstance(length, int) and not isinstance(length, bool) else None,
            version=self._version(),
            models=tuple(names),
        )
        resolved = replace(self, model=model, served=served)
        if self.route.pooling:
            resolved._probe_pooling()
        elif self.route.probed:
            resolved._probe_route()
        if tokenize and self.tokenizer_path is None:
            resolved = replace(resolved, served=replace(served, **resolved._probe_tokenize()))
        return resolved

    def _version(self) -> str | None:
        try:
            answer = fetch_json(self.url_of("/version"), self.api_key)
        except Unanswered:
            return None
        return str(answer.get("version")) if isinstance(answer, dict) else None

    def _probe_pooling(self) -> None:
        """One short input embedded (or one document scored) before the run: a server or model that does not
        is one line."""
        url = self.request_url
        body = json.loads(self.route.encode(request_of(self.endpoint, self.model, EMBEDDINGS_PROBE, stream=False)))
        what = self.route.verb
        try:
            answer = fetch_json(url, self.api_key, body, timeout_s=60)
        except Unanswered as exc:
            if exc.status is None:
                raise EnvironmentFailure(f"cannot reach {url}: {exc}") from None
            raise UsageError(
                f"{self.url} does not {what} with model {self.model!r}: {url} answered {exc} (serve "
                "a pooling model, e.g. vLLM's --runner pooling)"
            ) from None
        record = RequestRecord(request_id="probe", endpoint=self.endpoint)
        try:
            self.route.answer(record, json.dumps(answer).encode())
        except RequestError as exc:
            raise UsageError(f"{url} answered {exc} for one input: it does not serve {self.endpoint}") from None

    def _probe_route(self) -> None:
        """One request of one output token before the run, on a route many servers do not serve (the Responses
        and Messages APIs): a server that does not is one line, before any run directory."""
        url = self.request_url
        probe = request_of(self.endpoint, self.model, TOKENIZE_PROBE, max_tokens=1, stream=False)
        try:
            fetch_json(url, self.api_key, json.loads(self.route.encode(probe)), timeout_s=60)
        except Unanswered as exc:
            if exc.status is None:
                raise EnvironmentFailure(f"cannot reach {url}: {exc}") from None
            raise UsageError(
                f"{self.url} does not serve the {self.endpoint} route: {self.route.path} answered {exc}"
            ) from None

    def _probe_tokenize(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "prompt": TOKENIZE_PROBE, "add_special_tokens": False}
        try:
            count = fetch_json(self.tokenize_url, self.api_key, body, timeout_s=30).get("count")
        except Unanswered as exc:
            return {"tokenizes": False, "tokenize_error": str(exc)}
        except AttributeError:  # an answer that is not an object
            count = None
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            return {"tokenizes": False, "tokenize_error": "no token count in its answer"}
        return {"tokenizes": True, "tokenize_error": None}


class Unanswered(Exception):
    """No JSON answer from the server: `status` is the HTTP error's, 200 for an answer that is not JSON, None
    for no connection; the message is the status or the reason, never a key."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def fetch_json(url: str, api_key: str | None, body: dict[str, Any] | None = None, timeout_s: float = 10) -> Any:
    """GET `url` (POST `body`, as JSON, when given) and decode its JSON answer; Unanswered when there is none.
    For the few requests before and around a run (the resolution, the token counts): the run's own
    requests go through the streaming client."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        said = _error_said(exc)
        raise Unanswered(f"HTTP {exc.code}" + (f": {said}" if said else ""), exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise Unanswered(str(getattr(exc, "reason", exc))) from None
    except ValueError:  # not JSON, or urllib's "unknown url type" (a URL that did not pass the options' check)
        raise Unanswered("no JSON answer", 200) from None


def _error_said(exc: urllib.error.HTTPError) -> str:
    """The message of an HTTP error's OpenAI-style body (`error.message`, or FastAPI's `detail`), first line,
    at most 160 characters; empty when the body says none."""
    try:
        data = json.loads(exc.read() or b"null")
    except (ValueError, OSError):
        return ""
    if not isinstance(data, dict):
        return ""
    err = data.get("error")
    said = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else data.get("detail")
    return str(said).strip().splitlines()[0][:160] if said else ""


class TargetOptions(StrictModel):
    """The options every `loadproof run` command shares: where the server is, how to talk to it, where
    the run directory goes. `--tokenizer` is offered, and required, as the scenario's `tokenizer` says."""

    url: HttpUrl = Field(
        description="base URL of the OpenAI-compatible server", json_schema_extra=cli(panel=Panel.TARGET)
    )
    tokenizer: ExistingPath | None = Field(
        default=None,
        description="the model's tokenizer.json (or its folder)",
        json_schema_extra=cli(panel=Panel.TARGET),
    )
    model: str | None = Field(
        default=None,
        description="model name; default: the first at /v1/models",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="NAME"),
    )
    endpoint: Annotated[str, one_of(route_names())] = Field(
        default="chat",
        description="the route requests go to: completions, chat, responses (the OpenAI Responses API), "
        "messages (the Anthropic Messages API), embeddings, rerank or transcriptions (the last three: `run load` only)",
        json_schema_extra=cli(panel=Panel.TARGET),
    )
    profile: Path | None = Field(
        default=None,
        description="profile TOML, or a packaged profile's name (`loadproof profiles`): endpoint, model name, thinking",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="PROFILE"),
    )
    api_key_env: str | None = Field(
        default=None,
        description="name of the environment variable holding the API key",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="VAR"),
    )
    disable_thinking: bool = Field(
        default=False,
        description="send enable_thinking=false (chat); as --thinking off",
        json_schema_extra=cli(panel=Panel.TARGET),
    )
    thinking: Thinking | None = Field(
        default=None,
        description="a reasoning model's thinking (chat): off (enable_thinking=false), low "
        "(enable_thinking=true, reasoning_effort=low) or on (enable_thinking=true); default: the model's own, "
        "or the profile's serving.thinking",
        json_schema_extra=cli(panel=Panel.TARGET),
    )
    reasoning_effort: str | None = Field(
        default=None,
        description="reasoning_effort sent with each chat "
        "request: a word (e.g. low, medium, high); with --thinking low, instead of low",
        json_schema_extra=cli(panel=Panel.TARGET, metavar="EFFORT"),
    )
    engine_metrics: Annotated[tuple[MetricsSource, ...] | None, PlainValidator(sources_option)] = Field(
        default=None,
        json_schema_extra=cli(text=True, panel=Panel.ENGINE, metavar="URL[,URL...]"),
        description="where the engine's metrics come from: its /metrics URL (a bare http://HOST:PORT "
        "gets /metrics; through `loadproof relay`: RELAY/engine/metrics), or prometheus+http://HOST:9090?LABEL=VALUE "
        "for a Prometheus server's query API (e.g. ?job=vllm); a fleet: one URL a replica, comma-separated, in order "
        "(docs/fleet.md); default: the /metrics beside the server's URL, or each worker's a vllm-router there lists",
    )
    router_metrics: Annotated[MetricsSource | None, PlainValidator(router_option)] = Field(
        default=None,
        json_schema_extra=cli(text=True, panel=Panel.ENGINE, metavar="URL"),
        description="a fleet's router's own metrics: vllm-router's --prometheus-port exposition "
        "(http://HOST:29000 by default; its API port's /metrics is one worker's)",
    )
    router_policy: Annotated[str | None, PlainValidator(policy_option)] = Field(
        default=None,
        json_schema_extra=cli(text=True, panel=Panel.ENGINE, metavar="POLICY"),
        description="the policy the fleet's vllm-router runs (round_robin, cache_aware, consistent_hash, ...), "
        "for the expected prefix hits per replica; default: the one its decisions counter names",
    )
    token_counts: TokenCounts = Field(
        default="engine",
        description="where exact-length prompts count the tokens the engine adds (BOS, chat "
        "template): engine (its /tokenize) or local (the tokenizer folder's chat template rendered here, checked "
        "against the engine's usage.prompt_tokens before the run)",
        json_schema_extra=cli(panel=Panel.TARGET),
    )
    out: Path = Field(
        default=Path("runs"),
        description="the folder run directories go in",
        json_schema_extra=cli(panel=Panel.OUTPUT, metavar="DIR"),
    )
    price_per_gpu_hour: float | None = Field(
        default=None,
        gt=0,
        description="what one GPU-hour costs, > 0 (any currency): cost per million (good) tokens, "
        "from the GPUs NVML sees and the run's window",
        json_schema_extra=cli(panel=Panel.OUTPUT, metavar="PRICE"),
    )
    prediction: Path | None = Field(
        default=None,
        description="a prediction contract, JSON (`loadproof plan ... --simulate ... --prediction-out FILE`): "
        "the run is judged against it figure by figure (claims prediction.*), and fails when a figure misses its "
        "tolerance",
        json_schema_extra=cli(panel=Panel.CHECKS, metavar="FILE"),
    )
    price_per_kwh: float | None = Field(
        default=None,
        gt=0,
        description="what a kWh costs, > 0 (any currency): cost per million (good) tokens from the GPUs' energy counters",
        json_schema_extra=cli(panel=Panel.OUTPUT, metavar="PRICE"),
    )

    @field_validator("reasoning_effort")
    @classmethod
    def _reasoning_effort(cls, value: str | None) -> str | None:
        if value is not None and not value.isalpha():
            raise ValueError("must be a word, such as low, medium or high")
        return value

    @model_validator(mode="after")
    def _thinking(self) -> TargetOptions:
        if self.disable_thinking and self.thinking not in (None, "off"):
            raise ValueError(f"--disable-thinking contradicts --thinking {self.thinking}")
        if self.reasoning_effort is not None and self.thinking_mode == "off":
            raise ValueError("--reasoning-effort with thinking off: a model that does not think has no effort to set")
        return self

    @model_validator(mode="after")
    def _one_price(self) -> TargetOptions:
        if self.price_per_gpu_hour is not None and self.price_per_kwh is not None:
            raise ValueError("give --price-per-gpu-hour or --price-per-kwh, not both")
        return self

    @property
    def price(self) -> Price | None:
        """The manifest's `price`, where one was given."""
        if self.price_per_gpu_hour is None and self.price_per_kwh is None:
            return None
        return Price(per_gpu_hour=self.price_per_gpu_hour, per_kwh=self.price_per_kwh)

    @property
    def thinking_mode(self) -> Thinking | None:
        """--thinking, with --disable-thinking as `off`."""
        return "off" if self.disable_thinking else self.thinking

    @field_validator("api_key_env")
    @classmethod
    def _api_key_env(cls, value: str | None) -> str | None:
        if value and not os.environ.get(value):
            raise ValueError("that environment variable is not set")
        return value

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


def resolve_target(
    options: TargetOptions, profile: Profile | None, *, tokenize: bool = False, **overrides: Any
) -> Target:
    """The target the options (and the profile) name, resolved on its server (`Target.resolve`; with
    `tokenize`, its /tokenize asked where no `--tokenizer` was given): the first requests a command sends.
    `overrides` that are not None replace options (an A/B arm's URL or model)."""
    options = options.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    endpoint, model = options.endpoint, options.model
    if profile is not None:
        endpoint = profile.serving.endpoint
        model = model or profile.model.served_name
    engine = profile.engine if profile is not None else Target.engine
    thinking, effort = reasoning_mode(options, profile, endpoint)
    extra_body = (
        engines.get(engine).thinking_body(None if thinking is None else thinking != "off", effort)
        if thinking is not None or effort is not None
        else {}
    )
    sources = options.engine_metrics or ()
    fleet = fleet_of(sources, options.router_metrics, options.router_policy, options.url, options.api_key)
    target = Target(
        url=options.url,
        model=model or "",
        endpoint=endpoint,
        api_key=options.api_key,
        extra_body=extra_body,
        tokenizer_path=options.tokenizer,
        engine=engine,
        metrics=fleet.replicas[0] if fleet is not None else (sources[0] if sources else None),  # type: ignore[arg-type]  # None: beside the URL
        token_counts=options.token_counts,
        thinking=thinking,
        reasoning_effort=effort,
        fleet=fleet.with_caches() if fleet is not None else None,
    )
    return target.resolve(tokenize=tokenize)


def reasoning_mode(
    options: TargetOptions, profile: Profile | None, endpoint: str
) -> tuple[Thinking | None, str | None]:
    """The thinking mode and reasoning effort a run sends: `--thinking` (`--disable-thinking` is `off`),
    else the profile's `serving.thinking = "disable"`; `low` sends the effort `low` unless
    `--reasoning-effort` names another. None, None on a route that takes no thinking switch (completions: no chat template), where
    `--thinking` or `--reasoning-effort` is refused."""
    asked = options.thinking_mode
    if not route_of(endpoint).switches_thinking:
        if options.thinking is not None or options.reasoning_effort is not None:
            flag = "--thinking" if options.thinking is not None else "--reasoning-effort"
            raise UsageError(
                f"{flag} needs the chat endpoint: the {endpoint} endpoint takes no switch of the chat "
                "template's thinking (--endpoint chat)"
            )
        return None, None
    if asked is None and profile is not None and profile.serving.thinking == "disable":
        asked = "off"
    effort = options.reasoning_effort or ("low" if asked == "low" else None)
    return asked, effort
