"""A real speech-to-text engine: the packaged `embedded-asr` profile (vLLM's CPU build serving whisper-tiny, random
weights, on /v1/audio/transcriptions), started once for every module that takes `asr_engine`. A streamed
transcription, written by loadproof's own transcriptions adapter, counts the prompt tokens the profile's
`model.audio_tokens` rule says (per_s:100+4: the audio's log-mel frames and the decoder's 4), and the supervisor
keeps the engine up with a transcription of silence for its liveness probe (it serves no completion)."""

from __future__ import annotations

import io
import json
import urllib.request
import wave

import pytest

from loadproof.config.profile import packaged_profile
from loadproof.protocol.media import MediaTokens, audio_of
from loadproof.protocol.request import Message, Request, Sampling
from loadproof.protocol.routes import route_of
from loadproof.supervisor.probe import probe
from tests.integration.conftest import Engine

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]


def tone(seconds: float, rate: int = 16_000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(bytes(range(256)) * round(seconds * rate * 2 / 256))
    return buffer.getvalue()


def streamed_usage(asr: Engine, seconds: float) -> dict[str, int]:
    route = route_of(packaged_profile("embedded-asr").serving.endpoint)
    request = Request(
        route=route.name,
        model=asr.model,
        messages=(Message("user", (audio_of(tone(seconds)),)),),
        sampling=Sampling(max_tokens=2),
    )
    sent = urllib.request.Request(asr.url + route.path, route.encode(request), {"Content-Type": route.content_type})
    with urllib.request.urlopen(sent, timeout=120) as resp:
        events = [line.removeprefix(b"data: ") for line in resp.read().splitlines() if line.startswith(b"data: {")]
    usage: dict[str, int] = json.loads(events[-1])["usage"]
    return usage


def test_a_transcription_counts_the_profiles_audio_rule_and_the_probe_is_a_transcription(asr_engine: Engine) -> None:
    rule = packaged_profile("embedded-asr").model.audio_tokens
    assert rule is not None
    for seconds in (2.0, 7.0):
        usage = streamed_usage(asr_engine, seconds)
        assert usage["prompt_tokens"] == MediaTokens.parse(rule).audio(seconds), (seconds, usage)
        assert usage["completion_tokens"] == 2
    route = route_of(packaged_profile("embedded-asr").serving.endpoint)
    assert probe(asr_engine.url, asr_engine.model, 60, audio_route=route).ok
    assert probe(asr_engine.url, asr_engine.model, 60).status == 404  # no completions: why the probe transcribes
