"""The media options of `run load` (docs/scenarios.md, "Multimodal load"): `--images N:WxH,...`, `--audio-s S`,
`--video-frames F:WxH`, `--media-reuse P` and `--media-tokens RULE`, in the Media panel of `--help`.
`workloads.media` makes the files; `check_media_route` refuses, before any run directory, media the target's
route does not carry (its adapter's `media`), and a route that carries media alone (a transcription) without
any; `with_profile_rules` takes a profile's `[model] image_tokens`/`audio_tokens` where `--media-tokens` gives no
rule of a kind."""

from __future__ import annotations

from typing import Annotated, TypeVar

from pydantic import BeforeValidator, Field, PlainSerializer, model_validator

from loadproof.config.base import StrictModel
from loadproof.config.profile import Profile
from loadproof.errors import UsageError
from loadproof.protocol.media import MediaTokens
from loadproof.protocol.routes import Route, route_names, route_of
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

GIVEN = "--media-tokens"

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
        description="the prompt tokens the model spends per item, for the expected prompt tokens (default: the "
        f"--profile's [model] image_tokens/audio_tokens): {MEDIA_TOKENS_SYNTAX}",
        json_schema_extra=cli(text=True, panel=Panel.MEDIA, metavar="RULE"),
    )
    # where `media_tokens` came from, as the plan's media say (`with_profile_rules`); "": as given
    media_tokens_from: str = Field(default="", json_schema_extra=cli(hidden=True))

    def media_spec(self) -> MediaSpec:
        return MediaSpec(
            images=self.images or (), audio_s=self.audio_s, video=self.video_frames, reuse=self.media_reuse
        )

    @property
    def synthetic_media(self) -> bool:
        return bool(self.images or self.audio_s or self.video_frames)

    @property
    def media_tokens_source(self) -> str:
        """Where the rules came from, for the plan: `--media-tokens`, a profile's `[model]`, or both."""
        return self.media_tokens_from or (GIVEN if self.media_tokens else "")

    @model_validator(mode="after")
    def _media(self) -> MediaOptions:
        if self.media_reuse and not self.synthetic_media:
            raise ValueError("--media-reuse applies with --images, --audio-s or --video-frames")
        return self


def carriers(kind: str) -> str:
    """Which routes carry a kind of media, for the line that refuses it on another (`--endpoint chat` ...)."""
    names = [n for n in route_names() if kind in route_of(n).media]
    return f"--endpoint {' or '.join(names)} does" if names else "no route does"


MediaOptionsT = TypeVar("MediaOptionsT", bound=MediaOptions)


def check_media_route(options: MediaOptions, route: Route, endpoint: str, dataset: bool) -> None:
    """Media the route does not carry, or a route of media alone without any: one line (UsageError)."""
    flags = {"image": "--images", "audio": "--audio-s", "video": "--video-frames"}
    for kind in sorted(options.media_spec().kinds - route.media):
        raise UsageError(f"{flags[kind]}: the {endpoint} endpoint carries no {kind}; {carriers(kind)}")
    if not route.takes_text and not options.synthetic_media and not dataset:
        raise UsageError(
            f"--endpoint {endpoint} sends media alone: give --audio-s SECONDS (or a data set whose rows carry audio)"
        )


def with_profile_rules(options: MediaOptionsT, profile: Profile | None, dataset: bool) -> MediaOptionsT:
    """`options` whose `--media-tokens` holds, for each kind of media the run sends (any kind with a data set)
    that it gives no rule of, the profile's `[model] image_tokens` or `audio_tokens`; `media_tokens_from` says
    where each rule came from. `--media-tokens`' own rule of a kind wins; a run without media is unchanged."""
    if profile is None or not (options.synthetic_media or dataset):
        return options
    kinds = options.media_spec().kinds if not dataset else frozenset({"image", "video", "audio"})
    given = options.media_tokens or ()
    rules, sources = list(given), [GIVEN] if given else []
    for field, audio, wanted in (("image_tokens", False, {"image", "video"}), ("audio_tokens", True, {"audio"})):
        stated = getattr(profile.model, field)
        if stated is None or not kinds & wanted or any((r.kind == "per_s") == audio for r in given):
            continue
        rules.append(MediaTokens.parse(stated))
        sources.append(f"profile {profile.name} [model] {field}")
    if len(rules) == len(given):
        return options
    update = {"media_tokens": tuple(rules), "media_tokens_from": ", ".join(sources)}
    return options.model_copy(update=update)
