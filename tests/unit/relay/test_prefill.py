"""The relay's prefill hop, piece by piece: the prefill request it builds, the prompt's token ids it reads back, and
the bytes ExampleConnector wrote for a prompt, found by vLLM's own folder naming (worked out here by hand)."""

import hashlib
import json

import pytest

from loadproof.errors import UsageError
from loadproof.relay.prefill import PrefillConfig, prefill_body, prompt_token_ids, stored_bytes
from loadproof.relay.serve import relay_config


def test_the_prefill_request_is_the_same_prompt_for_one_token_not_streamed():
    request = {
        "model": "m",
        "prompt": "hello",
        "max_tokens": 300,
        "stream": True,
        "min_tokens": 10,
        "stream_options": {"include_usage": True},
        "temperature": 0.7,
    }
    body = json.loads(prefill_body(request, "/v1/completions", PrefillConfig("http://p")))
    assert body == {"model": "m", "prompt": "hello", "max_tokens": 1, "stream": False, "temperature": 0.7}
    assert request["max_tokens"] == 300  # the decode instance's request is left as it was


def test_chat_nixl_and_a_storage_folder_add_what_each_needs():
    request = {"model": "m", "messages": [], "max_completion_tokens": 50, "stream": True}
    body = json.loads(
        prefill_body(
            request, "/v1/chat/completions", PrefillConfig("http://p", "NixlConnector", kv_storage="/dev/shm/kv")
        )
    )
    assert body["max_completion_tokens"] == 1 and body["max_tokens"] == 1
    assert (
        body["kv_transfer_params"]["do_remote_decode"] is True
        and body["kv_transfer_params"]["do_remote_prefill"] is False
    )
    assert body["return_token_ids"] is True


def test_prompt_token_ids_from_a_completion_or_a_chat_answer():
    assert prompt_token_ids({"choices": [{"text": "x", "prompt_token_ids": [5, 6, 7]}]}) == [5, 6, 7]
    assert prompt_token_ids({"prompt_token_ids": [1, 2], "choices": [{}]}) == [1, 2]
    assert prompt_token_ids({"choices": [{"text": "x"}]}) is None
    assert prompt_token_ids({"choices": [{"prompt_token_ids": ["a"]}]}) is None


def test_stored_bytes_finds_the_prompts_folder_by_its_token_ids(tmp_path):
    ids = list(range(1000, 1000 + 40))  # 40 tokens, block 16: vLLM keeps (40 - 1) // 16 * 16 = 32 of them
    name = hashlib.md5(b"".join(i.to_bytes(8, "little") for i in ids[:32])).hexdigest()
    folder = tmp_path / name
    folder.mkdir()
    (folder / "model.layers.0.self_attn.attn.safetensors").write_bytes(b"x" * 1000)
    (folder / "model.layers.1.self_attn.attn.safetensors").write_bytes(b"x" * 24)
    assert stored_bytes(str(tmp_path), ids) == 1024
    assert stored_bytes(str(tmp_path), ids[:-1] + [7]) == 1024  # the last token is never part of the name
    assert stored_bytes(str(tmp_path), [7] + ids[1:]) is None  # another prompt: no folder
    assert stored_bytes(str(tmp_path), None) is None


def test_relay_options_name_their_problem():
    base = dict(max_in_flight=8, deadline_s=30, heartbeat_s=2, max_body_mib=1, body_timeout_s=5, keys_file=None)
    with pytest.raises(UsageError, match="--prefill-upstream must be an http"):
        relay_config("http://d", prefill_upstream="p:8000", **base)
    with pytest.raises(UsageError, match="give --prefill-upstream too"):
        relay_config("http://d", kv_storage="/dev/shm/kv", **base)
    with pytest.raises(UsageError, match="--kv-connector 'Mooncake'"):
        relay_config("http://d", prefill_upstream="http://p", kv_connector="Mooncake", **base)
    config = relay_config("http://d", prefill_upstream="http://p", kv_storage="/dev/shm/kv", **base)
    assert config.prefill == PrefillConfig("http://p", "ExampleConnector", "/dev/shm/kv")
