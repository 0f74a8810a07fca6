"""Image checks: synthetic pictures drawn with Pillow, sent as PNG data URLs in chat content parts.

Three kinds, each with one short true answer: the colour of a filled square, the number of circles
on a plain background, and a digit drawn as seven segments (no font, so the picture is the same on
every machine). Answers are scored by the authored-task checkers (`word`, `number`).
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw

from loadproof.workloads.quality.authored import Task

SIZE = 224
_COLOURS = {"red": (220, 30, 30), "green": (30, 160, 60), "blue": (30, 60, 210)}
# segments a..g as boxes on a 100x180 grid: top, upper right, lower right, bottom, lower left, upper left, middle
_SEGMENTS = {
    "a": (15, 0, 85, 15),
    "b": (85, 10, 100, 90),
    "c": (85, 90, 100, 170),
    "d": (15, 165, 85, 180),
    "e": (0, 90, 15, 170),
    "f": (0, 10, 15, 90),
    "g": (15, 82, 85, 98),
}
_DIGITS = {
    0: "abcdef",
    1: "bc",
    2: "abged",
    3: "abgcd",
    4: "fgbc",
    5: "afgcd",
    6: "afgedc",
    7: "abc",
    8: "abcdefg",
    9: "abcfgd",
}


@dataclass(frozen=True)
class ImageTask:
    id: str
    question: str
    check: dict[str, Any]
    draw: tuple[str, Any]

    def task(self) -> Task:
        """As an authored task, to be scored by the same checkers."""
        return Task(self.id, "image", self.question, self.check, reference="")

    def data_url(self) -> str:
        return png_data_url(render(*self.draw))


def image_tasks() -> list[ImageTask]:
    tasks = [
        ImageTask(
            f"image-colour-{name}",
            "What colour is the square in this picture? Reply with one word.",
            {"kind": "word", "accept": [name]},
            ("square", name),
        )
        for name in _COLOURS
    ]
    tasks += [
        ImageTask(
            f"image-circles-{n}",
            "How many circles are in this picture? Reply with the number only.",
            {"kind": "number", "expected": str(n)},
            ("circles", n),
        )
        for n in (2, 3, 5)
    ]
    tasks += [
        ImageTask(
            f"image-digit-{d}",
            "Which digit is shown in this picture? Reply with the digit only.",
            {"kind": "number", "expected": str(d)},
            ("digit", d),
        )
        for d in (3, 7)
    ]
    return tasks


def render(kind: str, value: Any) -> Image.Image:
    image = Image.new("RGB", (SIZE, SIZE), "white")
    draw = ImageDraw.Draw(image)
    if kind == "square":
        draw.rectangle((52, 52, 172, 172), fill=_COLOURS[value])
    elif kind == "circles":
        # centres on a 3x2 grid, taken in a fixed order
        centres = [(45, 60), (112, 60), (179, 60), (45, 164), (112, 164), (179, 164)][:value]
        for x, y in centres:
            draw.ellipse((x - 26, y - 26, x + 26, y + 26), fill="black")
    elif kind == "digit":
        left, top = 62, 22
        for segment in _DIGITS[value]:
            x0, y0, x1, y1 = _SEGMENTS[segment]
            draw.rectangle((left + x0, top + y0, left + x1, top + y1), fill="black")
    else:
        raise ValueError(f"unknown picture kind {kind!r}")
    return image


def png_data_url(image: Image.Image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def chat_messages(question: str, data_url: str) -> list[dict[str, Any]]:
    """One user message with the picture first, then the question, as OpenAI content parts."""
    return [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": data_url}}, {"type": "text", "text": question}],
        }
    ]


def probe_messages() -> list[dict[str, Any]]:
    """A tiny image request (64x64 white: some vision encoders reject smaller), to learn whether the
    server accepts images at all."""
    return chat_messages("Reply with OK.", png_data_url(Image.new("RGB", (64, 64), "white")))
