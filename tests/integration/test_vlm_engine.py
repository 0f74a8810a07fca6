"""A real multimodal engine: the packaged `embedded-vlm` profile (vLLM's CPU build serving idefics3-tiny, random
weights, image splitting off), started once for every module that takes `vlm_engine`. An image costs exactly the
prompt tokens the profile's `model.image_tokens` rule says (fixed:64+3, whatever its size), and vLLM's multimodal
cache counts a query for each image and a hit for one it has seen before."""

from __future__ import annotations

import base64
import io
import json
import random
import urllib.request
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.config.profile import packaged_profile
from loadproof.protocol.media import MediaTokens
from tests.integration.conftest import Engine

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]
QUESTION = "What is this?"


def png_data_url(width: int, height: int, seed: int) -> str:
    rng = random.Random(seed)
    image = Image.new("RGB", (width, height))
    image.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(width * height)])
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def chat(vlm: Engine, content: str | list[dict[str, Any]]) -> dict[str, Any]:
    body = {
        "model": vlm.model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 2,
        "temperature": 0,
        "ignore_eos": True,
    }
    request = urllib.request.Request(
        vlm.url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        answer: dict[str, Any] = json.load(resp)
    return answer


def test_an_image_costs_the_profiles_rule_in_prompt_tokens_and_a_second_sending_hits_the_cache(
    vlm_engine: Engine,
) -> None:
    rule = packaged_profile("embedded-vlm").model.image_tokens
    assert rule is not None
    width, height = 320, 200
    expected = MediaTokens.parse(rule).image(width, height)
    assert expected == 67  # 64 image tokens and 3 markers, whatever the image's size
    image = [{"type": "image_url", "image_url": {"url": png_data_url(width, height, 1)}}]
    text = chat(vlm_engine, [{"type": "text", "text": QUESTION}])["usage"]["prompt_tokens"]
    queries, hits = vlm_engine.metric("vllm:mm_cache_queries_total"), vlm_engine.metric("vllm:mm_cache_hits_total")
    first = chat(vlm_engine, [*image, {"type": "text", "text": QUESTION}])["usage"]["prompt_tokens"]
    assert first - text == expected, (text, first)
    assert vlm_engine.metric("vllm:mm_cache_queries_total") == queries + 1
    assert vlm_engine.metric("vllm:mm_cache_hits_total") == hits
    again = chat(vlm_engine, [*image, {"type": "text", "text": QUESTION}])["usage"]["prompt_tokens"]
    assert again == first
    assert vlm_engine.metric("vllm:mm_cache_queries_total") == queries + 2
    assert vlm_engine.metric("vllm:mm_cache_hits_total") == hits + 1
    wide = [{"type": "image_url", "image_url": {"url": png_data_url(900, 120, 2)}}]  # splitting off: the same 67
    assert chat(vlm_engine, [*wide, {"type": "text", "text": QUESTION}])["usage"]["prompt_tokens"] == first


def test_plan_simulate_load_on_a_vlm_profile_expects_its_tokens_an_image(vlm_engine: Engine) -> None:
    # beside the engine: `plan` reads the prepared model's config, which the engine's first serve makes
    args = ["plan", "embedded-vlm", "--simulate", "load", "--sim", "sim-small", "--rate", "1", "-n", "10"]
    result = CliRunner().invoke(
        app, [*args, "--input-tokens", "64", "--output-tokens", "8", "--images", "1:224x224", "--no-ranges"]
    )
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert (
        "media tokens per image (a video: per frame) by fixed:64+3 (profile embedded-vlm [model] image_tokens): "
        "224x224: 67 tokens (1 a request)" in out
    )
