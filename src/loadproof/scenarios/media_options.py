"""The media options of `run load` (docs/scenarios.md, "Multimodal load"): `--images N:WxH,...`, `--audio-s S`,
`--video-frames F:WxH`, `--media-reuse P` and `--media-tokens RULE`, in the Media panel of `--help`.
`workloads.media` makes the files; `check_media_route` refuses, before any run directory, media the target's
route does not carry (its adapter's `media`), and a route that carries media alone (a transcription) without
any."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, PlainSerializer, model_validator

from loadproof.config.base import StrictModel
from loadproof.errors import UsageError
from loadproof.protocol.media import MediaTokens
from loadproof.protocol.routes import Route
from loadproof.scenarios.options import Panel, cli
from loadproof.workloads.media import (
    IMAGES_SYNTAX,
    MAX_AUDIO_S,
    MEDIA_TOKENS_SYNTAX,
    VIDEO_SYNTAX,
    ImageGroup,
    MediaSpec,
    images_text,
    media_tokens_text,
    parse_images,
    parse_media_tokens,
    parse_video,
)

Images = Annotated[tuple[ImageGroup, ...], BeforeValidator(parse_images), PlainSerializer(images_text)]
Frames = Annotated[ImageGroup, BeforeValidator(parse_video), PlainSerializer(str)]
TokenRules = Annotated[tuple[MediaTokens, ...], BeforeValidator(parse_media_tokens), PlainSerializer(media_tokens_text)]


class MediaOptions(StrictModel):
    images: Images | None = Field(
        default=None,
        description=f"images each request carries before its text, seeded and new each request: {IMAGES_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.MEDIA, metavar="N:WxH,..."),
    )
    audio_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_AUDIO_S,
        description="seconds of seeded audio (16 kHz mono WAV) each request carries; "
        "with --endpoint transcriptions, the file each request transcribes",
        json_schema_extra=cli(panel=Panel.MEDIA, metavar="SECONDS"),
    )
    video_frames: Frames | None = Field(
        default=None,
        description=f"a video each request carries, its frames JPEG: {VIDEO_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.MEDIA, metavar="F:WxH"),
    )
    media_reuse: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="the share of requests, 0 to 1, that send again the media of an earlier request "
        "(drawn with the seed), which an engine's multimodal cache can hit",
        json_schema_extra=cli(panel=Panel.MEDIA, metavar="P"),
    )
    media_tokens: TokenRules | None = Field(
        default=None,
        description=f"the prompt tokens the model spends per item, for the expected prompt tokens: {MEDIA_TOKENS_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.MEDIA, metavar="RULE"),
    )

    def media_spec(self) -> MediaSpec:
        return MediaSpec(
            images=self.images or (), audio_s=self.audio_s, video=self.video_frames, reuse=self.media_reuse
        )

    @property
    def synthetic_media(self) -> bool:
        return bool(self.images or self.audio_s or self.video_frames)

    @model_validator(mode="after")
    def _media(self) -> MediaOptions:
        if self.media_reuse and not self.synthetic_media:
            raise ValueError("--media-reuse applies with --images, --audio-s or --video-frames")
        return self


def check_media_route(options: MediaOptions, route: Route, endpoint: str, dataset: bool) -> None:
    """Media the route does not carry, or a route of media alone without any: one line (UsageError)."""
    flags = {"image": "--images", "audio": "--audio-s", "video": "--video-frames"}
    for kind in sorted(options.media_spec().kinds - route.media):
        carried = ", ".join(sorted(route.media)) or "no media"
        raise UsageError(f"{flags[kind]}: the {endpoint} endpoint carries {carried}, not {kind}")
    if route.media and not route.conversational and not options.synthetic_media and not dataset:
        raise UsageError(
            f"--endpoint {endpoint} sends media alone: give --audio-s SECONDS (or a data set whose rows carry audio)"
        )
