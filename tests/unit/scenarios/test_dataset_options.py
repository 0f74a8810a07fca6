"""`run load --dataset` options: checked before anything is sent, one line each."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from loadproof.scenarios.load.options import LoadOptions


def options(**values):
    return LoadOptions.model_validate({"rate": 2, "num_requests": 4, **values})


def test_dataset_options_apply_with_a_dataset_only(tmp_path):
    with pytest.raises(ValidationError, match="--dataset-sample applies with --dataset FILE"):
        options(dataset_sample="first")
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "hi"}\n')
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
