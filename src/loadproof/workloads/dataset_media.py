"""The media of a data set's row (docs/scenarios.md, "Data sets with media"), read into typed parts and checked
by their own headers (`protocol.media`): a truncated PNG, an image under 2 or over 16,384 pixels a side, a
declared type the file is not, a field over 64 MB, audio that is not a WAV, a URL (never fetched) is a
`MediaError`, which the data-set reader turns into one line naming the file, the row and the field.

Where media sit in a row:

- `messages`: OpenAI chat content parts, `image_url` (a data URL, or a file's path relative to the data set's
  folder), `input_audio` (base64 `data` and its `format`), `video_url` (`data:video/jpeg;base64,F1,F2,...`);
- `images`: a list of images beside a `prompt`, a `messages` or a VisionArena `conversation`; each a data URL,
  a relative path, base64, raw bytes (Parquet) or a Hugging Face image `{"bytes": ..., "path": ...}`;
- MMMU: `image_1` .. `image_7`, each an image as in `images`, beside `question` and `options`.

Standard library only (Pillow is not needed to read a header).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from loadproof.protocol.media import (
    MAX_BYTES,
    MediaError,
    audio_of,
    decode_base64,
    from_data_url,
    image_of,
)
from loadproof.protocol.request import Audio, Image, Video

Media = Image | Audio | Video
MMMU_IMAGES = tuple(f"image_{i}" for i in range(1, 8))
MEDIA_FIELDS = ("images", "conversation", "question", "options", *MMMU_IMAGES)
_EXTENSION_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".wav": "audio/wav"}


def kind_of(part: Media) -> str:
    return "image" if isinstance(part, Image) else "audio" if isinstance(part, Audio) else "video"


def _file(path_text: str, base: Path | None) -> tuple[str | None, bytes]:
    """A local file named relative to the data set's folder: its declared type (by extension) and bytes."""
    if "://" in path_text or path_text.startswith(("http:", "https:")):
        raise MediaError(f"{path_text[:60]!r} is a URL: loadproof sends media inline and never fetches one")
    path = Path(path_text)
    if path.is_absolute() or base is None:
        raise MediaError(f"{path_text!r}: name a media file by its path relative to the data set's folder")
    full = base / path
    try:
        size = full.stat().st_size
    except OSError:
        raise MediaError(f"{path_text}: no such file next to the data set") from None
    if size > MAX_BYTES:
        raise MediaError(f"{path_text}: a file of {size / 1e6:,.0f} MB (at most {MAX_BYTES // 1_000_000} MB)")
    return _EXTENSION_TYPES.get(path.suffix.lower()), full.read_bytes()


def _url_or_file(text: str, base: Path | None) -> tuple[str | None, bytes]:
    if text.startswith("data:"):
        mime, data = from_data_url(text)
        return mime, data
    return _file(text, base)


def image_value(value: Any, base: Path | None) -> Image:
    """An image as a data set holds it: a data URL, a relative path, base64, bytes, or `{"bytes", "path"}`."""
    if isinstance(value, dict):
        raw = value.get("bytes")
        if raw is not None:
            return image_value(raw, base)
        if value.get("path"):
            return image_value(str(value["path"]), base)
        if "url" in value:
            return image_value(str(value["url"]), base)
        raise MediaError("an image object with neither bytes nor path")
    if isinstance(value, (bytes, bytearray)):
        return image_of(bytes(value))
    if not isinstance(value, str) or not value:
        raise MediaError(f"not an image ({type(value).__name__})")
    if value.startswith("data:") or "://" in value or Path(value[-8:]).suffix.lower() in _EXTENSION_TYPES:
        mime, data = _url_or_file(value, base)
        return image_of(data, mime)
    return image_of(decode_base64(value))  # plain base64


def content_media(part: dict[str, Any], base: Path | None) -> Media | None:
    """One chat content part's media (None: a text part)."""
    kind = part.get("type")
    if kind == "image_url":
        url = part.get("image_url")
        url = url.get("url", "") if isinstance(url, dict) else url
        mime, data = _url_or_file(str(url or ""), base)
        return image_of(data, mime)
    if kind == "input_audio":
        audio = part.get("input_audio") or {}
        if not isinstance(audio, dict):
            raise MediaError("input_audio is not an object with data and format")
        fmt = str(audio.get("format", "wav"))
        return audio_of(decode_base64(str(audio.get("data", ""))), f"audio/{fmt}")
    if kind == "video_url":
        url = part.get("video_url")
        url = str(url.get("url", "") if isinstance(url, dict) else url or "")
        head, _, rest = url.partition(",")
        if head != "data:video/jpeg;base64":
            raise MediaError("a video goes as its JPEG frames: data:video/jpeg;base64,F1,F2,...")
        return Video([image_of(decode_base64(f), "image/jpeg") for f in rest.split(",")])
    if kind not in (None, "text"):
        raise MediaError(f"a content part of type {kind!r} (takes text, image_url, input_audio, video_url)")
    return None


def messages_media(messages: list[dict[str, Any]], field: str, base: Path | None) -> dict[int, list[Media]]:
    """Each message's media by its index (MediaError naming the part)."""
    out: dict[int, list[Media]] = {}
    for i, m in enumerate(messages):
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            try:
                media = content_media(part, base)
            except MediaError as exc:
                raise MediaError(f"field {field}[{i}].content[{j}]: {exc}") from None
            if media is not None:
                out.setdefault(i, []).append(media)
    return out


def row_images(value: dict[str, Any], col: Any, base: Path | None) -> list[Media]:
    """The images of `images` (a list, or one) and MMMU's `image_1`..`image_7`, in that order."""
    out: list[Media] = []
    images = value.get(col("images"))
    if images is not None:
        listed = images if isinstance(images, list) else [images]
        for i, image in enumerate(listed):
            if image is None:
                continue
            try:
                out.append(image_value(image, base))
            except MediaError as exc:
                raise MediaError(f"field {col('images')}[{i}]: {exc}") from None
    for name in MMMU_IMAGES:
        image = value.get(col(name))
        if image is None:
            continue
        try:
            out.append(image_value(image, base))
        except MediaError as exc:
            raise MediaError(f"field {col(name)}: {exc}") from None
    return out


def conversation_text(conversation: Any) -> str | None:
    """VisionArena's `conversation`: the first user turn's text (turns as lists of messages, or messages)."""
    turns = conversation
    if isinstance(turns, list) and turns and isinstance(turns[0], list):
        turns = [m for turn in turns for m in turn]
    if not isinstance(turns, list):
        return None
    for m in turns:
        if isinstance(m, dict) and m.get("role", "user") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
    return None


def mmmu_prompt(question: str, options: Any) -> str:
    """MMMU's question and its lettered options (`options`: a list, or its Python text)."""
    if isinstance(options, str):
        try:
            options = ast.literal_eval(options)
        except (ValueError, SyntaxError):
            options = [options]
    listed = [str(o) for o in options] if isinstance(options, list) else []
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return question + "".join(f"\n{letters[i]}. {o}" for i, o in enumerate(listed[:26]))
