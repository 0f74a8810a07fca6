"""`run load`'s media options and a data set's media: every bad input is one line naming the option (or the
file, the row and the field), exit 2, before anything is sent and before any run directory (issue #39, "Bad
input"); the rows of VisionArena's and MMMU's shapes and local files are read into typed parts."""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image as PILImage
from pydantic import ValidationError

from loadproof.errors import UsageError
from loadproof.protocol import media as media_module
from loadproof.protocol.request import Audio, Image
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.load.scenario import check_endpoint
from loadproof.workloads.datasets import DatasetSpec, select
from loadproof.workloads.media import synthetic_audio

BASE = ["run", "load", "--url", "http://127.0.0.1:9", "--tokenizer", "README.md", "--rate", "2", "-n", "4"]


def loadproof(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadproof", *args, "--out", str(cwd / "runs")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
    )


def png(width: int = 8, height: int = 8) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), (10, 20, 30)).save(out, format="PNG")
    return out.getvalue()


def resized(data: bytes, width: int, height: int) -> bytes:
    """A PNG whose header says another size (the pixels are never read)."""
    return data[:16] + struct.pack(">II", width, height) + data[24:]


def url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_row(image_url: str) -> dict:
    content = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": image_url}}]
    return {"messages": [{"role": "user", "content": content}]}


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def one_line_exit_2(result: subprocess.CompletedProcess[str], tmp_path: Path, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--images", "2:512"], ["--images", "'2:512' does not parse: takes N:WxH"]),
        (["--images", "1:1x1"], ["--images", "the width 1 is outside 2..16384 pixels"]),
        (["--images", "1:20000x20000"], ["--images", "the width 20000 is outside 2..16384"]),
        (["--video-frames", "8"], ["--video-frames", "does not parse: takes F:WxH"]),
        (["--media-tokens", "tiles:4"], ["--media-tokens", "give fixed:N, patches:P or per_s:R"]),
        (["--media-reuse", "0.5"], ["--media-reuse applies with --images"]),
        (
            ["--images", "1:64x64", "--endpoint", "completions"],
            ["--images: the completions endpoint carries no image; --endpoint chat or responses or messages does"],
        ),
        (
            ["--audio-s", "2", "--endpoint", "messages", "--no-ignore-eos"],
            ["--audio-s: the messages endpoint carries no audio; --endpoint chat or transcriptions does"],
        ),
        (
            ["--images", "1:64x64", "--endpoint", "transcriptions"],
            ["--images: the transcriptions endpoint carries no image"],
        ),
        (["--endpoint", "transcriptions"], ["--endpoint transcriptions sends media alone: give --audio-s"]),
    ],
)
def test_a_bad_media_option_is_one_line_and_exit_2(tmp_path, args, needles):
    one_line_exit_2(loadproof(tmp_path, *BASE, *args), tmp_path, *needles)


def _bad_rows(tmp_path: Path) -> dict[str, tuple[dict, list[str]]]:
    good = png()
    big = tmp_path / "big.png"
    with open(big, "wb") as fh:  # 200 MB on the file system's word, none of it written (sparse)
        fh.truncate(200 * 1024 * 1024)
    not_audio = base64.b64encode(b"these bytes are no WAV file, whatever they say").decode()
    return {
        "truncated": (image_row(url(good[:-20])), ["a truncated PNG"]),
        "tiny": (image_row(url(png(1, 1))), ["1x1 image: its width is outside 2..16384 pixels"]),
        "huge": (image_row(url(resized(good, 20_000, 20_000))), ["20000x20000 image"]),
        "mime": (image_row(url(good, "image/jpeg")), ["declared image/jpeg, but the file is image/png"]),
        "file_200mb": (image_row("big.png"), ["big.png: a file of 210 MB (at most 67 MB)"]),
        "audio": (
            {"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": not_audio}}]}]},
            ["not a WAV audio file (declared audio/wav)"],
        ),
        "url": (image_row("https://example.com/cat.png"), ["is a URL: loadproof sends media inline"]),
    }


@pytest.mark.parametrize("case", ["truncated", "tiny", "huge", "mime", "file_200mb", "audio", "url"])
def test_a_bad_media_file_in_a_data_set_is_one_line_naming_file_row_and_field(tmp_path, case):
    row, needles = _bad_rows(tmp_path)[case]
    data = write_rows(tmp_path / "data.jsonl", [{"prompt": "a text row"}, row])  # the bad one is row 1
    result = loadproof(tmp_path, *BASE, "--endpoint", "chat", "--dataset", str(data))
    field = "messages[0].content[0]" if case == "audio" else "messages[0].content[1]"
    one_line_exit_2(result, tmp_path, "data.jsonl: row 1 (line 2)", f"field {field}", *needles)


def test_a_200_mb_base64_field_is_refused_by_its_length_before_it_is_decoded(tmp_path, monkeypatch):
    monkeypatch.setattr(media_module, "MAX_BYTES", 1000)  # the length check, without 200 MB in a test
    decoded = []
    monkeypatch.setattr(media_module.base64, "b64decode", lambda *a, **k: decoded.append(1))
    data = write_rows(tmp_path / "data.jsonl", [{"prompt": "hi"}, image_row(url(png(64, 64) + b"\0" * 2000))])
    opts = LoadOptions.model_validate({"rate": 2, "num_requests": 4, "dataset": str(data)})
    with pytest.raises(
        UsageError, match=r"data.jsonl: row 1 \(line 2\): field messages\[0\].content\[1\]: a base64 field of"
    ):
        check_endpoint(opts, "chat")
    assert not decoded


def test_data_set_media_the_endpoint_does_not_carry_are_one_line(tmp_path):
    data = write_rows(tmp_path / "data.jsonl", [{"prompt": "hi"}, image_row(url(png()))])
    result = loadproof(tmp_path, *BASE, "--endpoint", "completions", "--dataset", str(data))
    one_line_exit_2(
        result,
        tmp_path,
        "data.jsonl: row 1 carries image; the completions endpoint carries none (--endpoint chat or responses or messages does)",
    )


def test_synthetic_media_options_do_not_go_with_a_data_set(tmp_path):
    data = write_rows(tmp_path / "data.jsonl", [{"prompt": "hi"}])
    with pytest.raises(ValidationError, match="with --dataset each row carries its own"):
        LoadOptions.model_validate({"rate": 2, "num_requests": 4, "dataset": str(data), "images": "1:8x8"})


def _select(path: Path, n: int = 1):
    return select(DatasetSpec(str(path), sample="first"), n, lambda items: [10] * len(items)).items


def test_visionarena_mmmu_local_files_and_audio_rows_are_read_into_typed_parts(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(png(32, 16))
    wav = synthetic_audio(0.5, __import__("random").Random(1)).data
    b64 = base64.b64encode(png(12, 10)).decode()
    rows = [
        {  # VisionArena: conversation (turns of messages) + images as Hugging Face image objects
            "conversation": [[{"role": "user", "content": "describe"}, {"role": "assistant", "content": "a cat"}]],
            "images": [{"bytes": b64, "path": None}],
        },
        {
            "question": "Which? <image 1>",
            "options": "['red', 'blue']",
            "image_1": {"path": "img/a.png"},
            "image_2": None,
        },
        {
            "messages": [
                {"role": "system", "content": "be brief"},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "input_audio",
                            "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"},
                        },
                        {"type": "image_url", "image_url": {"url": "img/a.png"}},
                        {"type": "text", "text": "and this?"},
                    ],
                },
            ]
        },
        {"prompt": "plain text"},
    ]
    items = _select(write_rows(tmp_path / "mm.jsonl", rows), 4)
    arena, mmmu, chat, plain = items
    assert arena.prompt == "describe" and [(p.width, p.height) for p in arena.media[0]] == [(12, 10)]
    assert mmmu.prompt == "Which? <image 1>\nA. red\nB. blue"
    assert [(p.width, p.height) for p in mmmu.media[0]] == [(32, 16)]
    assert [type(p) for p in chat.media[1]] == [Audio, Image] and chat.media[1][0].seconds == 0.5
    assert chat.messages[1]["content"] == "and this?" and plain.media is None
    assert chat.media_kinds() == {"audio", "image"}


def test_a_question_without_images_is_no_mmmu_row(tmp_path):
    data = write_rows(tmp_path / "q.jsonl", [{"question": "hi"}, {"prompt": "p"}])
    assert [i.prompt for i in _select(data)] == ["p"]
    assert os.path.exists(data)
