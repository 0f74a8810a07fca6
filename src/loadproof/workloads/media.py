"""Seeded synthetic media for a multimodal load run (`run load --images`, `--audio-s`, `--video-frames`).

- An image of exactly W x H pixels (PNG): a tile of 8 x 8 random colours drawn from
  `random.Random("<seed>:<salt>:media:<request>:<item>")`, scaled up bilinearly to W x H, so its content is the
  request's own and an engine's multimodal preprocessor cache (keyed on the pixels) never hits it;
- a video: F such frames, each JPEG (the chat API's `video_url` carries JPEG frames);
- audio: a WAV of S seconds, 16 kHz mono PCM16, each sample from the same kind of seeded stream.

`--media-reuse P` makes round(P x N) of the N requests (never the first) send the media of an earlier request
that sent its own, both drawn from `random.Random("<seed>:media-reuse")`: the share of requests whose media
the engine has seen before. The salt is the run's (random per run, as the text prompts' is), so two runs of
one seed never share a cached image; a test passes its own for bytes that repeat.

`MediaCounts` (records.py) is what a request's record keeps of its media: counts, pixels, bytes, seconds and
each item's digest, never the bytes.
"""

from __future__ import annotations

import io
import random
import re
from dataclasses import dataclass

from PIL import Image as PILImage

from loadproof.protocol.media import MAX_SIDE, MIN_SIDE, MediaError, MediaTokens, pcm16_wav
from loadproof.protocol.request import Audio, Image, Video, digest
from loadproof.records import MediaCounts

IMAGES_SYNTAX = "N:WxH[,N:WxH...], N images of W x H pixels each, e.g. 2:512x512,1:1024x768"
VIDEO_SYNTAX = "F:WxH, F frames of W x H pixels, e.g. 8:448x448"
SAMPLE_RATE = 16_000
MAX_AUDIO_S = 3600.0
MAX_FRAMES = 1024
MAX_ITEMS = 256  # images a request carries at most

Media = Image | Audio | Video
_QUARTER = bytes(b & 0x1F if b < 0x80 else b | 0xE0 for b in range(256))
_GROUP = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*[xX]\s*(\d+)\s*$")


@dataclass(frozen=True)
class ImageGroup:
    """`N:WxH`: `count` images of `width` x `height` pixels."""

    count: int
    width: int
    height: int

    def __str__(self) -> str:
        return f"{self.count}:{self.width}x{self.height}"


def _group(part: str, syntax: str) -> ImageGroup:
    match = _GROUP.match(part)
    if match is None:
        raise ValueError(f"{part.strip()!r} does not parse: takes {syntax}")
    count, width, height = (int(g) for g in match.groups())
    if count < 1:
        raise ValueError(f"{part.strip()!r}: the count must be at least 1")
    for side, name in ((width, "width"), (height, "height")):
        if not MIN_SIDE <= side <= MAX_SIDE:
            raise ValueError(f"{part.strip()!r}: the {name} {side} is outside {MIN_SIDE}..{MAX_SIDE} pixels")
    return ImageGroup(count, width, height)


def parse_images(value: object) -> tuple[ImageGroup, ...]:
    """`2:512x512,1:1024x768` -> the groups (a tuple of groups passes through)."""
    if isinstance(value, (tuple, list)) and all(isinstance(g, ImageGroup) for g in value):
        return tuple(value)
    groups = tuple(_group(p, IMAGES_SYNTAX) for p in str(value).split(","))
    if sum(g.count for g in groups) > MAX_ITEMS:
        raise ValueError(f"{value}: more than {MAX_ITEMS} images a request")
    return groups


def images_text(groups: tuple[ImageGroup, ...]) -> str:
    return ",".join(map(str, groups))


def parse_video(value: object) -> ImageGroup:
    """`8:448x448` -> 8 frames of 448 x 448."""
    if isinstance(value, ImageGroup):
        return value
    group = _group(str(value), VIDEO_SYNTAX)
    if group.count > MAX_FRAMES:
        raise ValueError(f"{value}: more than {MAX_FRAMES} frames")
    return group


@dataclass(frozen=True)
class MediaSpec:
    """What each synthetic request carries besides its text."""

    images: tuple[ImageGroup, ...] = ()
    audio_s: float | None = None
    video: ImageGroup | None = None
    reuse: float = 0.0

    @property
    def kinds(self) -> set[str]:
        return {k for k, on in (("image", self.images), ("audio", self.audio_s), ("video", self.video)) if on}


def _rng(seed: int, salt: str, request: int, item: int) -> random.Random:
    return random.Random(f"{seed}:{salt}:media:{request}:{item}")


def _picture(width: int, height: int, rng: random.Random) -> PILImage.Image:
    tile = PILImage.frombytes("RGB", (8, 8), rng.randbytes(8 * 8 * 3))
    return tile.resize((width, height), PILImage.Resampling.BILINEAR)


def synthetic_image(width: int, height: int, rng: random.Random) -> Image:
    """A PNG of exactly `width` x `height` pixels whose content `rng` draws."""
    out = io.BytesIO()
    _picture(width, height, rng).save(out, format="PNG", compress_level=1)
    return Image(out.getvalue(), "image/png", width, height)


def synthetic_frame(width: int, height: int, rng: random.Random) -> Image:
    out = io.BytesIO()
    _picture(width, height, rng).save(out, format="JPEG", quality=85)
    return Image(out.getvalue(), "image/jpeg", width, height)


def synthetic_audio(seconds: float, rng: random.Random) -> Audio:
    """A WAV of `seconds` (16 kHz mono PCM16), its samples from `rng` at a quarter of full scale."""
    samples = max(1, round(seconds * SAMPLE_RATE))
    raw = bytearray(rng.randbytes(2 * samples))
    raw[1::2] = raw[1::2].translate(_QUARTER)  # each sample's high byte: |sample| <= 8192
    return Audio(pcm16_wav(bytes(raw), SAMPLE_RATE), "audio/wav", samples / SAMPLE_RATE)


def reuse_sources(n: int, share: float, seed: int) -> list[int | None]:
    """For each of `n` requests, the earlier request whose media it sends again (None: its own)."""
    rng = random.Random(f"{seed}:media-reuse")
    k = min(max(n - 1, 0), round(share * n))
    reusing = set(rng.sample(range(1, n), k)) if k else set()
    sources: list[int | None] = [None] * n
    fresh = [0] if n else []
    for i in range(1, n):
        if i in reusing:
            sources[i] = rng.choice(fresh)
        else:
            fresh.append(i)
    return sources


def request_media(spec: MediaSpec, n: int, seed: int, salt: str) -> list[list[Media]]:
    """Every request's media, in the order they go before its text: images by group, a video, an audio."""
    out: list[list[Media]] = []
    for k, source in enumerate(reuse_sources(n, spec.reuse, seed)):
        if source is not None:
            out.append(out[source])
            continue
        items: list[Media] = []
        item = 0
        for group in spec.images:
            for _ in range(group.count):
                items.append(synthetic_image(group.width, group.height, _rng(seed, salt, k, item)))
                item += 1
        if spec.video is not None:
            v = spec.video
            items.append(
                Video([synthetic_frame(v.width, v.height, _rng(seed, salt, k, item + f)) for f in range(v.count)])
            )
            item += v.count
        if spec.audio_s:
            items.append(synthetic_audio(spec.audio_s, _rng(seed, salt, k, item)))
        out.append(items)
    return out


def counts_of(items: list[Media], rules: tuple[MediaTokens, ...] = ()) -> MediaCounts:
    """What a record keeps of a request's media; with `rules` (`--media-tokens`), the prompt tokens they imply
    (None where an item has no rule of its kind)."""
    images = frames = pixels = size = 0
    seconds = 0.0
    hashes: list[str] = []
    tokens: int | None = 0 if rules else None
    for part in items:
        if isinstance(part, Image):
            images += 1
            pixels += part.pixels
            size += len(part.data)
            hashes.append(digest(part.data))
        elif isinstance(part, Video):
            frames += len(part.frames)
            pixels += part.pixels
            size += sum(len(f.data) for f in part.frames)
            hashes.append(digest(b"".join(f.data for f in part.frames)))
        else:
            seconds += part.seconds
            size += len(part.data)
            hashes.append(digest(part.data))
        spent = _tokens(rules, part)
        tokens = None if tokens is None or spent is None else tokens + spent
    return MediaCounts(
        images=images,
        video_frames=frames,
        audio_s=round(seconds, 6),
        pixels=pixels,
        bytes=size,
        hashes=",".join(hashes),
        tokens=tokens,
    )


def _tokens(rules: tuple[MediaTokens, ...], part: Media) -> int | None:
    audio = isinstance(part, Audio)
    rule = next((r for r in rules if (r.kind == "per_s") == audio), None)
    if rule is None:
        return None
    if isinstance(part, Audio):
        return rule.audio(part.seconds)
    if isinstance(part, Video):
        return sum(rule.image(f.width, f.height) for f in part.frames)
    return rule.image(part.width, part.height)


MEDIA_TOKENS_SYNTAX = "fixed:N, patches:P (images) and per_s:R (audio), each with an optional +K; an image and an audio rule may go together, comma-separated"


def parse_media_tokens(value: object) -> tuple[MediaTokens, ...]:
    """`patches:28+2` or `fixed:256,per_s:50`: at most one rule for images and one for audio."""
    if isinstance(value, (tuple, list)) and all(isinstance(r, MediaTokens) for r in value):
        return tuple(value)
    try:
        rules = tuple(MediaTokens.parse(p.strip()) for p in str(value).split(","))
    except MediaError as exc:
        raise ValueError(str(exc)) from None
    if sum(r.kind == "per_s" for r in rules) > 1 or sum(r.kind != "per_s" for r in rules) > 1:
        raise ValueError(f"{value}: one rule for images and one for audio at most ({MEDIA_TOKENS_SYNTAX})")
    return rules


def media_tokens_text(rules: tuple[MediaTokens, ...]) -> str:
    return ",".join(map(str, rules))
