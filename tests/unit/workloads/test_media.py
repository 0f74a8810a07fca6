"""Seeded synthetic media (workloads/media.py): exact sizes, the same bytes from the same seed and salt, every
request's own content, `--media-reuse`'s share, and the specs that parse and those that do not."""

from __future__ import annotations

import io
import random
import wave

import pytest
from PIL import Image as PILImage

from loadproof.protocol.media import MediaTokens, audio_of, image_of
from loadproof.protocol.request import Audio, Image, Video
from loadproof.workloads.media import (
    ImageGroup,
    MediaSpec,
    counts_of,
    parse_images,
    parse_media_tokens,
    parse_video,
    request_media,
    reuse_sources,
    synthetic_audio,
    synthetic_image,
)


def test_an_image_is_a_png_of_exactly_its_size_and_reads_back_by_its_header():
    img = synthetic_image(300, 17, random.Random(1))
    assert (img.width, img.height, img.mime) == (300, 17, "image/png")
    assert image_of(img.data) == img
    assert PILImage.open(io.BytesIO(img.data)).size == (300, 17)


def test_audio_is_a_16khz_mono_wav_of_its_seconds():
    audio = synthetic_audio(1.5, random.Random(2))
    assert audio.seconds == 1.5 and audio_of(audio.data).seconds == 1.5
    with wave.open(io.BytesIO(audio.data)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()) == (16_000, 1, 2, 24_000)


def test_the_same_seed_and_salt_give_the_same_bytes_and_every_request_its_own():
    spec = MediaSpec(images=(ImageGroup(2, 32, 24),), video=ImageGroup(3, 16, 16), audio_s=0.25)
    a = request_media(spec, 5, 7, "salt")
    assert a == request_media(spec, 5, 7, "salt")
    assert a != request_media(spec, 5, 7, "other") and a != request_media(spec, 5, 8, "salt")
    kinds = [type(p) for p in a[0]]
    assert kinds == [Image, Image, Video, Audio]
    video = a[0][2]
    assert isinstance(video, Video) and len(video.frames) == 3 and all(f.mime == "image/jpeg" for f in video.frames)
    digests = [counts_of(items).hashes for items in a]
    items = [d for h in digests for d in h.split(",")]
    assert len(set(items)) == len(items) == 5 * 4  # no item repeats: the preprocessor cache never hits


@pytest.mark.parametrize(("n", "share"), [(100, 0.3), (10, 0.5), (50, 0.0), (8, 1.0)])
def test_media_reuse_is_the_share_of_requests_that_send_an_earlier_requests_media(n, share):
    sources = reuse_sources(n, share, 731)
    assert sources == reuse_sources(n, share, 731)
    reusing = [i for i, s in enumerate(sources) if s is not None]
    assert len(reusing) == min(n - 1, round(share * n))
    assert sources[0] is None
    assert all(sources[s] is None and s < i for i, s in enumerate(sources) if s is not None)
    media = request_media(MediaSpec(images=(ImageGroup(1, 8, 8),), reuse=share), n, 731, "x")
    hashes = [counts_of(m).hashes for m in media]
    assert len(set(hashes)) == n - len(reusing)


def test_counts_keep_sizes_and_digests_and_the_rule_s_tokens():
    spec = MediaSpec(images=(ImageGroup(2, 56, 28),), video=ImageGroup(2, 28, 28), audio_s=2.0)
    items = request_media(spec, 1, 1, "s")[0]
    counts = counts_of(items, parse_media_tokens("patches:28+2,per_s:50"))
    assert (counts.images, counts.video_frames, counts.audio_s) == (2, 2, 2.0)
    assert counts.pixels == 2 * 56 * 28 + 2 * 28 * 28
    assert counts.bytes == sum(len(p.data) for p in items if not isinstance(p, Video)) + sum(
        len(f.data) for p in items if isinstance(p, Video) for f in p.frames
    )
    assert counts.tokens == 2 * (2 * 1 + 2) + 2 * (1 + 2) + 100
    assert len(counts.hashes.split(",")) == 4
    assert counts_of(items).tokens is None
    assert counts_of(items, (MediaTokens.parse("fixed:256"),)).tokens is None  # the audio has no rule


def test_specs_parse_and_print_as_given():
    assert parse_images("2:512x512, 1:1024X768") == (ImageGroup(2, 512, 512), ImageGroup(1, 1024, 768))
    assert parse_video("8:448x448") == ImageGroup(8, 448, 448)
    assert [str(r) for r in parse_media_tokens("fixed:256+2,per_s:50")] == ["fixed:256+2", "per_s:50"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("2:512", "does not parse: takes N:WxH"),
        ("two:512x512", "does not parse"),
        ("0:64x64", "the count must be at least 1"),
        ("1:1x1", "the width 1 is outside 2..16384 pixels"),
        ("1:20000x20000", "the width 20000 is outside 2..16384 pixels"),
        ("300:8x8", "more than 256 images a request"),
    ],
)
def test_an_images_spec_that_does_not_parse_says_why(text, said):
    with pytest.raises(ValueError, match=said):
        parse_images(text)


def test_media_token_rules_one_of_each_kind():
    with pytest.raises(ValueError, match="one rule for images and one for audio"):
        parse_media_tokens("fixed:256,patches:14")
    with pytest.raises(ValueError, match="give fixed:N, patches:P or per_s:R"):
        parse_media_tokens("tiles:4")
