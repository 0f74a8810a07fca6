"""Liveness: a real one-token completion with a timeout (for a pooling model, one short input embedded; for a
speech-to-text model, a tenth of a second of silence transcribed), and what the engine has done meanwhile.

vLLM's /health can answer 200 while the engine core is hung (vLLM #36451, #17972), so the probe asks
for a token. Its answer is a typed ProbeResult: the supervisor branches on the outcome, never on the
text. A TIMEOUT is not always a hang: a probe waits in the engine's FIFO queue behind long prefills, so
the supervisor compares the engine's own counters (`engine_work`) before and after.
"""

from __future__ import annotations

import enum
import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from loadproof.config.profile import ServingSpec
from loadproof.protocol.media import pcm16_wav
from loadproof.protocol.request import Audio, Message, Request, Sampling
from loadproof.protocol.routes import Route, route_of
from loadproof.protocol.urls import url_of
from loadproof.telemetry.server_metrics import parse_metrics

if TYPE_CHECKING:
    from loadproof.engines.process import EngineProcess

WORK_METRICS = ("prompt_tokens_total", "generation_tokens_total", "kv_cache_usage_perc")
T = TypeVar("T")


class ProbeOutcome(enum.Enum):
    OK = "ok"
    TIMEOUT = "timeout"  # no answer within the probe timeout: hung, or queued behind long prefills
    HTTP_ERROR = "http_error"  # an answer with a non-2xx status (401 for a wrong key, 500, 503)
    REFUSED = "refused"  # the connection was refused: nothing listens on the port
    BAD_ANSWER = "bad_answer"  # 200, but not a completion (not JSON, no choices) or no vector
    ERROR = "error"  # any other transport failure (reset, closed mid-answer)
    CANCELLED = "cancelled"  # the supervisor was stopped while it waited


@dataclass(frozen=True)
class ProbeResult:
    outcome: ProbeOutcome
    detail: str = ""
    status: int | None = None  # the HTTP status, for HTTP_ERROR

    @property
    def ok(self) -> bool:
        return self.outcome is ProbeOutcome.OK

    def __str__(self) -> str:
        return self.outcome.value + (f": {self.detail}" if self.detail else "")


OK = ProbeResult(ProbeOutcome.OK)


def silence(seconds: float = 0.1, rate: int = 16_000) -> bytes:
    """A WAV of `seconds` of silence, 16-bit mono: what a transcription probe sends."""
    return pcm16_wav(b"\0\0" * round(seconds * rate), rate)


def probe(
    url: str,
    model: str,
    timeout_s: float,
    api_key: str | None = None,
    *,
    embeddings: bool = False,
    audio_route: Route | None = None,
) -> ProbeResult:
    """A real one-token completion (`embeddings`: one short input embedded, for a pooling model, which serves
    no completion; `audio_route`: a tenth of a second of silence transcribed, one token, for a model that serves
    only audio), sent with the engine's API key when it has one (the key is never part of the result)."""
    fields: dict[str, object]  # the body's fields besides the model
    content_type = "application/json"
    if audio_route is not None:
        heard = Audio(silence(), "audio/wav", 0.1)
        asked = Request(
            route=audio_route.name,
            model=model,
            messages=(Message("user", (heard,)),),
            sampling=Sampling(max_tokens=1),
            stream=False,
        )
        path, answer_key, body = audio_route.path, "text", audio_route.encode(asked)
        content_type = audio_route.content_type
    else:
        if embeddings:
            path, answer_key, fields = "/v1/embeddings", "data", {"input": "Hello"}
        else:
            fields = {"prompt": "Hello", "max_tokens": 1, "temperature": 0}
            path, answer_key = "/v1/completions", "choices"
        body = json.dumps({"model": model, **fields}).encode()
    request = urllib.request.Request(url_of(url, path), data=body, headers={"Content-Type": content_type})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    timeout = ProbeResult(ProbeOutcome.TIMEOUT, f"no answer within {timeout_s:g} s")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            data = json.loads(resp.read())
    except TimeoutError:
        return timeout
    except urllib.error.HTTPError as exc:
        return ProbeResult(ProbeOutcome.HTTP_ERROR, f"HTTP {exc.code}", status=exc.code)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return timeout
        if isinstance(exc.reason, ConnectionRefusedError):
            return ProbeResult(ProbeOutcome.REFUSED, "connection refused")
        return ProbeResult(ProbeOutcome.ERROR, _describe(exc.reason))
    except ValueError:
        return ProbeResult(ProbeOutcome.BAD_ANSWER, "not JSON")
    except (OSError, http.client.HTTPException) as exc:  # reset, closed mid-answer, a malformed status line
        return ProbeResult(ProbeOutcome.ERROR, _describe(exc))
    if not isinstance(data, dict) or answer_key not in data or (not data[answer_key] and audio_route is None):
        return ProbeResult(ProbeOutcome.BAD_ANSWER, f"an answer without {answer_key}")
    return OK


def _describe(reason: object) -> str:
    return f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)


def engine_work(url: str, metric_names: dict[str, str], api_key: str | None = None) -> tuple[float, ...] | None:
    """What the engine has done so far: its prompt and generation token counters and KV usage (these move
    while it prefills or decodes anything), under the engine's own metric names; None when /metrics does
    not answer or shows none of them."""
    request = urllib.request.Request(url_of(url, "/metrics"))
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:
            values = parse_metrics(resp.read().decode("utf-8", "replace"), metric_names)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    return tuple(values.get(k, -1.0) for k in WORK_METRICS) if any(k in values for k in WORK_METRICS) else None


def probe_engine(engine: EngineProcess, served_name: str, timeout_s: float, cancel: threading.Event) -> ProbeResult:
    """`probe` on an engine process (its URL and key), waited for in a way a stop ends within 0.1 s."""
    return _cancellable(
        lambda: probe(engine.url, served_name, timeout_s, engine.api_key),
        cancel,
        ProbeResult(ProbeOutcome.CANCELLED, "stopped while probing"),
    )


def probe_embedder(engine: EngineProcess, served_name: str, timeout_s: float, cancel: threading.Event) -> ProbeResult:
    """`probe_engine` for a pooling model: one short input embedded."""
    return _cancellable(
        lambda: probe(engine.url, served_name, timeout_s, engine.api_key, embeddings=True),
        cancel,
        ProbeResult(ProbeOutcome.CANCELLED, "stopped while probing"),
    )


def probe_listener(
    route: Route, engine: EngineProcess, served_name: str, timeout_s: float, cancel: threading.Event
) -> ProbeResult:
    """`probe_engine` for a model that serves only audio (speech to text): silence transcribed on `route`."""
    return _cancellable(
        lambda: probe(engine.url, served_name, timeout_s, engine.api_key, audio_route=route),
        cancel,
        ProbeResult(ProbeOutcome.CANCELLED, "stopped while probing"),
    )


def prober_for(serving: ServingSpec) -> Callable[[EngineProcess, str, float, threading.Event], ProbeResult]:
    """The probe a profile's engine answers: one input embedded for a pooling model, silence transcribed where
    the endpoint's route takes no text but audio (`takes_text` false: a transcription), else a one-token
    completion."""
    route = route_of(serving.endpoint)
    if serving.runner == "pooling":
        return probe_embedder
    if not route.takes_text and "audio" in route.media:
        return partial(probe_listener, route)
    return probe_engine


def engine_work_of(engine: EngineProcess) -> tuple[float, ...] | None:
    """`engine_work` with the metric names of the engine's adapter (the engine registry's)."""
    return engine_work(engine.url, engine.engine.metric_names, engine.api_key)


def _cancellable(call: Callable[[], T], cancel: threading.Event, cancelled: T) -> T:
    """`call()` in a helper thread; `cancelled` as soon as `cancel` is set. An abandoned call ends on its
    own timeout (or at once, when the engine it talks to is stopped)."""
    box: list[T] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append(call())
        finally:
            done.set()

    threading.Thread(target=run, name="loadproof-probe", daemon=True).start()
    while not done.wait(0.1):
        if cancel.is_set():
            return cancelled
    if not box:  # the call raised: it never should (probe catches what urllib raises)
        raise RuntimeError("the probe failed without a result")
    return box[0]
