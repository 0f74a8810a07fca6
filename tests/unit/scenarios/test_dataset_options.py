"""`run load --dataset` options: checked before anything is sent, one line each."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from loadproof.scenarios.load.options import LoadOptions


def options(**values):
    return LoadOptions.model_validate({"rate": 2, "num_requests": 4, **values})


def test_dataset_options_apply_with_a_dataset_only(tmp_path):
    with pytest.raises(ValidationError, match="--dataset-sample applies with --dataset FILE"):
        options(dataset_sample="first")
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "hi", "question": "hi"}\n')
    got = options(dataset=str(path), dataset_columns="prompt=question", dataset_repeat=True)
    assert got.dataset_columns == {"prompt": "question"}
    again = LoadOptions.model_validate(got.model_dump())  # what a sweep's next run does
    assert again.dataset == str(path) and again.dataset_columns == {"prompt": "question"}
    with pytest.raises(ValidationError, match="--shared-prefix-tokens shapes synthetic prompts"):
        options(dataset=str(path), shared_prefix_tokens=64)
    with pytest.raises(ValidationError, match="--dataset-min-input-tokens is above --dataset-max-input-tokens"):
        options(dataset=str(path), dataset_min_input_tokens=100, dataset_max_input_tokens=10)


def test_a_missing_file_or_a_hub_id_is_refused_before_anything_is_sent(tmp_path):
    with pytest.raises(ValidationError, match="looks like a Hugging Face hub id"):
        options(dataset="lmsys/chatbot_arena_conversations")
    with pytest.raises(ValidationError, match="no such file or folder"):
        options(dataset=str(tmp_path / "none.jsonl"))


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("empty.jsonl", b"", "empty: no rows"),
        ("garbage.jsonl", b"\x89PNG\r\n\x1a\n\x00\xff", "row 0 (line 1): not valid UTF-8"),
        ("garbage.json", b"\x00\x01binary", "row 0 (line 1): not JSON"),
        ("other.jsonl", b'{"question": "hi"}\n', "no usable prompt among 1 rows (1 without a prompt)"),
    ],
)
def test_an_empty_or_garbage_data_set_is_refused_with_the_options(tmp_path, name, content, said):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValidationError, match=re.escape(said)):
        options(dataset=str(path))


def test_a_data_set_is_read_as_its_columns_are_mapped(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"question": "hi"}\n')
    assert options(dataset=str(path), dataset_columns="prompt=question").dataset == str(path)
