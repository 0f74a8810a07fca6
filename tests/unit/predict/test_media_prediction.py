"""`plan --simulate load` with media (`predict.media`): each request's prompt holds its media's tokens by the
rule (`--media-tokens`, else the sim profile's), prefilled at the profile's prefill cost, so the predicted TTFT
grows with the images' count and size exactly as the rule counts them; a repeat (`--media-reuse`) is a
multimodal-cache hit that saves no prefill, and saves the prefix cache's blocks of the media it repeats; a
route or a sim profile that cannot take the media is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from loadproof.cli import app
from loadproof.errors import UsageError
from loadproof.predict.load import RateSweep, predict_load_sweep, rate_sweep
from loadproof.sim.config import CostModel, SimConfig
from loadproof.sim.prompt import USER_HEAD

PREFILL_S = 1e-4  # a prompt token's prefill
COST = CostModel(step_overhead_s=0.01, prefill_s_per_token=PREFILL_S, decode_s_per_seq=1e-3, request_overhead_s=0.02)
CFG = SimConfig(max_num_batched_tokens=2048, num_gpu_blocks=4000, max_model_len=4096, cost=COST)
TEXT = 128


def sweep(**media: object) -> RateSweep:
    """A request every 2 s (each alone on the modeled engine), 20 of them, a 128-token text and 8 outputs."""
    values = {"rate": "0.5", "arrival": "constant", "num_requests": 20, "input_tokens": str(TEXT), "output_tokens": "8"}
    return rate_sweep({**values, "endpoint": "chat", **media})


def ttft(config: SimConfig = CFG, **media: object) -> float:
    value = predict_load_sweep(config, sweep(**media)).rates[0].run.value("load.ttft_s.p50")
    assert isinstance(value, float)
    return value


def test_the_predicted_ttft_grows_with_the_images_count_and_size_as_the_rule_counts_them():
    text = ttft()
    # patches:28: ceil(W/28) x ceil(H/28) tokens an image, each prefilled as a text token is
    for images, tokens in (("1:224x224", 64), ("4:224x224", 256), ("1:448x448", 256), ("2:448x448,1:224x224", 576)):
        assert ttft(images=images, media_tokens="patches:28") - text == pytest.approx(tokens * PREFILL_S, abs=1e-9)
    # fixed:N: N an image whatever its size, so only the count moves it
    small, large = (
        ttft(images="2:224x224", media_tokens="fixed:64"),
        ttft(images="2:1024x1024", media_tokens="fixed:64"),
    )
    assert small == pytest.approx(large, abs=1e-12) and small - text == pytest.approx(128 * PREFILL_S, abs=1e-9)
    # without --media-tokens, the sim profile's rule (its image_tokens), as the simulator counts them
    assert ttft(images="1:224x224") - text == pytest.approx(64 * PREFILL_S, abs=1e-9)  # SimConfig's fixed:64
    patched = CFG.model_copy(update={"image_tokens": "patches:14+2"})
    assert ttft(patched, images="1:224x224") - text == pytest.approx((16 * 16 + 2) * PREFILL_S, abs=1e-9)
    # a video: each frame as an image
    assert ttft(video_frames="4:224x224", media_tokens="fixed:10") - text == pytest.approx(40 * PREFILL_S, abs=1e-9)


def test_the_records_carry_the_media_as_a_runs_do_and_the_prompt_tokens_agree_with_the_rule():
    run = predict_load_sweep(CFG, sweep(images="2:224x224", media_tokens="fixed:64")).rates[0].run
    assert run.value("load.media.requests") == 20
    assert run.value("load.media.images_per_s") == pytest.approx(2 * 20 / run.value("load.duration_s"), rel=1e-3)
    assert run.value("load.media.pixels_per_request") == 2 * 224 * 224
    assert run.value("load.media.prompt_tokens_per_request.engine") == TEXT + 128
    assert run.value("load.media.prompt_tokens_per_request.expected") == TEXT + 128
    assert run.value("load.media.prompt_tokens_mismatched") == 0
    assert run.value("load.media.bytes_per_request") is None  # a prediction encodes no file
    assert run.value("load.media.mm_cache_hit_pct") == 0.0  # every image new: no repeat
    assert run.media is not None and run.media.tokens == 128


def test_a_repeat_hits_the_multimodal_cache_without_saving_prefill_and_the_prefix_cache_saves_its_blocks():
    fresh = predict_load_sweep(CFG, sweep(images="4:224x224", media_tokens="fixed:64")).rates[0].run
    again = predict_load_sweep(CFG, sweep(images="4:224x224", media_tokens="fixed:64", media_reuse=0.9)).rates[0].run
    assert again.value("load.media.reused_pct") == 90.0 and again.value("load.media.mm_cache_hit_pct") == 90.0
    assert (
        again.value("load.media.engine_mm_cache_queries") == 80 and again.value("load.media.engine_mm_cache_hits") == 72
    )
    # the repeated head and 256 media tokens: their full 16-token blocks are prefix-cache hits, nothing more
    shared = (len(USER_HEAD.encode()) + 256) // CFG.block_size * CFG.block_size
    assert again.prefix_cache_hits == 18 * shared and fresh.prefix_cache_hits == 0
    assert fresh.value("load.ttft_s.p50") - again.value("load.ttft_s.p50") == pytest.approx(
        shared * PREFILL_S, abs=1e-9
    )
    # with no prefix cache a repeat prefills all of it: the multimodal cache's hit saves nothing
    uncached = CFG.model_copy(update={"enable_prefix_caching": False})
    assert ttft(uncached, images="4:224x224", media_tokens="fixed:64", media_reuse=0.9) == pytest.approx(
        fresh.value("load.ttft_s.p50"), abs=1e-12
    )


def test_media_alone_on_a_transcription_route_prefills_the_audio_tokens_only():
    values = {"rate": "0.5", "arrival": "constant", "num_requests": 10, "output_tokens": "8", "audio_s": 2.0}
    run = predict_load_sweep(CFG, rate_sweep({**values, "endpoint": "transcriptions"})).rates[0].run
    assert run.value("load.media.prompt_tokens_per_request.engine") is None  # no text planned: no expectation
    assert run.value("load.media.audio_s_per_s") is not None and run.media is not None and run.media.tokens == 100


@pytest.mark.parametrize(
    ("values", "config", "message"),
    [
        ({"images": "1:64x64", "endpoint": "completions"}, CFG, "--images: the completions endpoint carries no image"),
        ({"audio_s": 1.0, "endpoint": "messages"}, CFG, "--audio-s: the messages endpoint carries no audio"),
        ({"images": "1:64x64", "endpoint": "embeddings"}, CFG, "--endpoint embeddings: the prediction models a route"),
        (
            {"images": "1:64x64"},
            CFG.model_copy(update={"image_tokens": ""}),
            "--images: the sim profile's model sim-model is text-only (no image_tokens",
        ),
        (
            {"audio_s": 1.0},
            CFG.model_copy(update={"audio_tokens": ""}),
            "--audio-s: the sim profile's model sim-model is text-only (no audio_tokens",
        ),
    ],
)
def test_media_the_route_or_the_sim_profile_cannot_take_is_one_line(values, config, message):
    base = {"rate": "1", "num_requests": 5, "input_tokens": "64", "output_tokens": "4"}
    with pytest.raises(UsageError, match="^" + message.replace("(", r"\(")) as caught:
        predict_load_sweep(config.model_copy(update={"model": "sim-model"}), rate_sweep({**base, **values}))
    assert "\n" not in str(caught.value)


def test_plan_simulate_load_with_images_on_the_packaged_simulator_profile():
    args = ["plan", "sim-small", "--simulate", "load", "--rate", "2", "-n", "20", "--input-tokens", "128"]
    result = CliRunner().invoke(
        app, [*args, "--output-tokens", "16", "--images", "2:224x224", "--media-tokens", "fixed:64"]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "input 128 + 128 tokens of media, output 16" in " ".join(out.split())
    assert "Predicted media" in out and "images/s" in out
    assert (
        "media tokens per image (a video: per frame) by fixed:64 (--media-tokens): 224x224: 64 tokens (2 a request)"
        in out
    )
    assert "media: 2:224x224 a request on the chat route, 128 prompt tokens of media a request" in out
    # refused before any prediction: one line, exit 2 (the command line's `main` maps a UsageError to 2)
    refused = subprocess.run(
        [sys.executable, "-m", "loadproof", *args, "--images", "2:224x224", "--endpoint", "completions"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert (
        refused.stderr
        == "error: --images: the completions endpoint carries no image; --endpoint chat or responses or messages does\n"
    )
