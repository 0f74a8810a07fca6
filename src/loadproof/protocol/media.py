"""Media files read from their own headers: an image's format and size, an audio file's length. Standard
library only (a bundle's checker and the simulator read these too), and strict: a file that is not what it
says, truncated, or outside what an engine takes is a `MediaError` naming why, never a guess.

- PNG: the signature and the IHDR chunk (width, height); the file must end with an IEND chunk (a truncated PNG
  is caught here, before an engine's decoder fails on it mid-run).
- JPEG: the SOI marker, then the first start-of-frame segment's size; the file must end with EOI.
- WAV: RIFF/WAVE with a `fmt ` and a `data` chunk; its seconds are the data's bytes over the byte rate.
- A data URL (`data:MIME;base64,...`) is decoded and its MIME type checked against the file's own header.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import struct
import wave
from dataclasses import dataclass

from loadproof.protocol.request import Audio, Image

MIN_SIDE = 2  # an image of 1 pixel a side: no vision encoder takes it
MAX_SIDE = 16_384  # past this an image is a mistake (vLLM's processors resize far below it)
MAX_BYTES = 64 * 1024 * 1024  # one media item; a base64 field past it is refused before it is decoded
IMAGE_TYPES = ("image/png", "image/jpeg")
AUDIO_TYPES = ("audio/wav", "audio/x-wav", "audio/wave")


class MediaError(ValueError):
    """A media item that cannot be sent: the message says why, in a user's words."""


def sniff(data: bytes) -> str | None:
    """The MIME type a file's header says, or None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    return None


def image_of(data: bytes, mime: str | None = None) -> Image:
    """An Image from its file's bytes; `mime` (a declared type) must agree with the header."""
    found = sniff(data)
    if found not in IMAGE_TYPES:
        raise MediaError(f"not a PNG or JPEG image{f' (declared {mime})' if mime else ''}")
    if mime is not None and mime not in IMAGE_TYPES:
        raise MediaError(f"declared {mime}, but the file is {found}")
    if mime is not None and mime != found:
        raise MediaError(f"declared {mime}, but the file is {found}")
    width, height = _png_size(data) if found == "image/png" else _jpeg_size(data)
    for side, name in ((width, "width"), (height, "height")):
        if side < MIN_SIDE or side > MAX_SIDE:
            raise MediaError(f"{width}x{height} image: its {name} is outside {MIN_SIDE}..{MAX_SIDE} pixels")
    return Image(data, found, width, height)


def audio_of(data: bytes, mime: str | None = None) -> Audio:
    """An Audio from a WAV file's bytes (its seconds from the header and the data chunk)."""
    if sniff(data) != "audio/wav":
        raise MediaError(f"not a WAV audio file{f' (declared {mime})' if mime else ''}")
    if mime is not None and mime not in AUDIO_TYPES:
        raise MediaError(f"declared {mime}, but the file is audio/wav")
    byte_rate, data_bytes = 0, None
    pos = 12
    while pos + 8 <= len(data):
        chunk, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        if chunk == b"fmt " and size >= 16:
            byte_rate = struct.unpack("<I", data[pos + 16 : pos + 20])[0]
        elif chunk == b"data":
            data_bytes = min(size, len(data) - pos - 8)
            break
        pos += 8 + size + (size & 1)
    if not byte_rate or data_bytes is None:
        raise MediaError("a WAV file without a fmt and a data chunk")
    if data_bytes == 0:
        raise MediaError("a WAV file of no samples")
    return Audio(data, "audio/wav", data_bytes / byte_rate)


def pcm16_wav(samples: bytes, rate: int) -> bytes:
    """A mono WAV file of 16-bit samples (little-endian, as `samples` holds them) at `rate` per second."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)
    return out.getvalue()


def decode_base64(text: str) -> bytes:
    """A base64 field's bytes; one past MAX_BYTES is refused before it is decoded."""
    if len(text) * 3 // 4 > MAX_BYTES:
        raise MediaError(f"a base64 field of {len(text) * 3 // 4 / 1e6:,.0f} MB (at most {MAX_BYTES // 1_000_000} MB)")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise MediaError(f"not base64: {exc}") from None


def from_data_url(url: str) -> tuple[str, bytes]:
    """The MIME type and bytes of a `data:` URL; any other URL is refused (loadproof never fetches one)."""
    if not url.startswith("data:"):
        raise MediaError(f"{url[:60]!r} is not a data URL: loadproof sends media inline and never fetches a URL")
    head, sep, payload = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        raise MediaError("a data URL that is not base64")
    return head.removesuffix(";base64"), decode_base64(payload)


def _png_size(data: bytes) -> tuple[int, int]:
    if len(data) < 33 or data[12:16] != b"IHDR":
        raise MediaError("a truncated PNG (no IHDR chunk)")
    if not data.rstrip(b"\x00")[-12:].startswith(b"\x00\x00\x00\x00IEND"):
        raise MediaError("a truncated PNG (it does not end with IEND)")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _jpeg_size(data: bytes) -> tuple[int, int]:
    if not data.rstrip(b"\x00").endswith(b"\xff\xd9"):
        raise MediaError("a truncated JPEG (it does not end with EOI)")
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            raise MediaError("a JPEG whose segments do not parse")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        size = struct.unpack(">H", data[pos + 2 : pos + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if pos + 9 > len(data):
                break
            height, width = struct.unpack(">HH", data[pos + 5 : pos + 9])
            return width, height
        pos += 2 + size
    raise MediaError("a truncated JPEG (no frame header)")


@dataclass(frozen=True)
class MediaTokens:
    """The prompt tokens an architecture spends on one media item, as its processor counts them:

    - `fixed:N`: N per image whatever its size (Gemma 3 and PaliGemma's SigLIP: 256; BLIP-2's query tokens: 32);
    - `patches:P`: ceil(W/P) x ceil(H/P) per image, a patch grid of P pixels a side (Qwen2-VL's 28-pixel merged
      patches, Pixtral's 16);
    - `per_s:R` (audio): R per second of audio (Whisper's encoder: 50);
    each plus `extra` tokens of markers around the item (`fixed:256+2`). A video counts each frame as an image.
    """

    kind: str  # "fixed", "patches", "per_s"
    value: float
    extra: int = 0

    @classmethod
    def parse(cls, text: str) -> MediaTokens:
        kind, _, rest = text.partition(":")
        number, _, extra = rest.partition("+")
        try:
            value, plus = float(number), int(extra or 0)
        except ValueError:
            value, plus = -1.0, -1
        if kind not in ("fixed", "patches", "per_s") or value <= 0 or plus < 0:
            raise MediaError(f"media tokens {text!r}: give fixed:N, patches:P or per_s:R (each with an optional +K)")
        return cls(kind, value, plus)

    def image(self, width: int, height: int) -> int:
        if self.kind == "fixed":
            return round(self.value) + self.extra
        if self.kind == "patches":
            p = self.value
            return math.ceil(width / p) * math.ceil(height / p) + self.extra
        raise MediaError(f"media tokens {self}: a per-second rule counts audio, not images")

    def audio(self, seconds: float) -> int:
        if self.kind != "per_s":
            raise MediaError(f"media tokens {self}: give per_s:R for audio")
        return math.ceil(seconds * self.value) + self.extra

    def __str__(self) -> str:
        value = f"{self.value:g}"
        return f"{self.kind}:{value}" + (f"+{self.extra}" if self.extra else "")
