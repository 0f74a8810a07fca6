"""Synthetic images: what each picture shows is what its answer says."""

import base64
import io

from PIL import Image

from loadproof.workloads.quality import images


def decode(url: str) -> Image.Image:
    assert url.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")


def test_colour_square_is_that_colour():
    task = next(t for t in images.image_tasks() if t.id == "image-colour-red")
    image = decode(task.data_url())
    assert image.size == (images.SIZE, images.SIZE)
    assert image.getpixel((112, 112)) == (220, 30, 30) and image.getpixel((5, 5)) == (255, 255, 255)


def test_circle_count_and_digits_are_drawn_deterministically():
    tasks = {t.id: t for t in images.image_tasks()}
    assert len(tasks) == len(images.image_tasks())
    three = decode(tasks["image-circles-3"].data_url())
    centres = [(45, 60), (112, 60), (179, 60), (45, 164)]
    assert [three.getpixel(c) for c in centres] == [(0, 0, 0)] * 3 + [(255, 255, 255)]
    assert tasks["image-digit-7"].data_url() == tasks["image-digit-7"].data_url()
    assert tasks["image-digit-7"].data_url() != tasks["image-digit-3"].data_url()


def test_chat_message_carries_the_picture_as_a_content_part():
    (message,) = images.chat_messages("Which digit?", "data:image/png;base64,AAAA")
    assert message["content"][0] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    assert message["content"][1] == {"type": "text", "text": "Which digit?"}
    assert decode(images.probe_messages()[0]["content"][0]["image_url"]["url"]).size == (64, 64)
