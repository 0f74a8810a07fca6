"""The sanitizer on hand-picked values: what goes, under which placeholder, and what must stay."""

import pytest

from loadproof.publish.sanitize import Sanitizer, field_kind


@pytest.fixture
def s():
    return Sanitizer(include_this_machine=False)


@pytest.mark.parametrize("text", [
    "meta-llama/Llama-3.1-8B", "embedded:gemma3-270m", "Qwen/Qwen2.5-7B-Instruct", "0.32.0", "550.54.15",
    "vllm:num_requests_running", "throughput.english.c1.decode_tokens_per_s", "capacity.verdict",
    "report.md", "[kv_cache_utils.py:2327]", "INFO 11-30 08:37:02 CPU KV cache size: 991,390 tokens",
    "29ca9dcaf49085392a98eab2c9ac6693110f433e-dirty", "2026-11-30T08:37:13Z", "/v1/chat/completions", "/metrics",
    "vllm.entrypoints.openai.api_server", "session 878", "max_tokens=128", "first token: 0.52 s", "tokens/s",
    "std::vector", "runs/throughput-20261130-083713-1022", "docker.io/vllm/vllm-openai:v0.6.3",
    "vllm/vllm-openai@sha256:" + "ab" * 32, "usage.prompt_tokens == 1536 for 4/4 sessions", "e.g. this",
])
def test_legitimate_values_stay(s, text):
    assert s.text(text) == text


@pytest.mark.parametrize(("text", "clean"), [
    ("http://127.0.0.1:53407", "<url>"),
    ("see https://gpu7.corp.example.com:8000/v1/models.", "see <url>."),
    ("cannot reach 10.0.0.5:8000: refused", "cannot reach <ip>:8000: refused"),
    ("127.0.0.1", "<ip>"),
    ("::1", "<ip>"),
    ("[::1]:8000", "[<ip>]:8000"),
    ("fe80::1%eth0 up", "<ip> up"),
    ("addr 2001:db8:85a3::8a2e:370:7334", "addr <ip>"),
    ("english:2001:db8::1", "english:<ip>"),
    ("::ffff:10.0.0.1", "<ip>"),
    ("node7.cluster.internal", "<host>"),
    ("registry.corp.internal:5000/vllm:0.6", "<host>:5000/vllm:0.6"),
    ("localhost:8000", "<host>:8000"),
    ("ip-10-0-0-5", "<host>"),
    ("mail ops@example.com now", "mail <email> now"),
    ("ssh root@gpu-node-7", "ssh <email>"),
    ("/home/alice/models/x", "<path>"),
    ("/tmp", "<path>"),
    ("--model=/models/llama", "--model=<path>"),
    ("~/models/llama", "<path>"),
    ("C:\\Users\\bob\\m", "<path>"),
    ("\\\\fileserver\\share\\m", "<path>"),
    ("sk-abcdefghij1234567890", "<secret>"),
    ("sk-proj-AbC_dEf-1234567890", "<secret>"),
    ("hf_AbCdEfGhIjKlMnOp", "<secret>"),
    ("ghp_" + "a1" * 18, "<secret>"),
    ("Authorization: Bearer abc.def-123", "Authorization: <secret>"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "<secret>"),
    ("api_key=abcdef12345", "api_key=<secret>"),
    ('{"api_key": "abcdefgh123"}', '{"api_key": "<secret>"}'),
    ("--api-key abcdefgh1234 --port 8000", "--api-key <secret> --port 8000"),
    ("password: hunter2", "password: <secret>"),
    ("HF_TOKEN=hf_x", "HF_TOKEN=<secret>"),
])
def test_private_values_become_placeholders(s, text, clean):
    assert s.text(text) == clean


def test_field_names_decide_for_short_or_bare_values(s):
    manifest = {
        "key": "session 878",  # a probe's key is words, not a credential
        "api_key": "abcdefgh1234", "HF_TOKEN": "hf_x", "password": "x", "db": {"secret": "p"},
        "host": "myserver", "head_address": "HEAD_NODE_IP", "serving": {"hostname": "dgx01"},
        "launch": ["--host", "gpu-node-7", "--api-key", "zzzzzzzz1", "--port", "8000"],
        "max_tokens": 5, "api_key_used": True, "prompt_tokens": 22,
        "env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"},
    }
    assert s.value(manifest) == {
        "key": "session 878", "api_key": "<secret>", "HF_TOKEN": "<secret>", "password": "<secret>",
        "db": {"secret": "<secret>"}, "host": "<host>", "head_address": "<host>", "serving": {"hostname": "<host>"},
        "launch": ["--host", "<host>", "--api-key", "<secret>", "--port", "8000"],
        "max_tokens": 5, "api_key_used": True, "prompt_tokens": 22,
        "env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"},
    }


def test_keys_are_sanitized_and_stay_distinct(s):
    assert s.value({"10.0.0.1": 1, "10.0.0.2": 2, "ok": "/root/x"}) == {"<ip>": 1, "<ip>~": 2, "ok": "<path>"}


def test_a_hostname_learned_from_a_host_field_is_scrubbed_everywhere():
    s = Sanitizer(include_this_machine=False)
    s.learn({"serving": {"host": "dgx-a100-07"}, "launch": ["--host", "gpu-box-3"], "engine": "vllm"})
    s.learn({"server": "vllm"})  # a plain word is never learned: it would erase "vllm" everywhere
    assert s.text("connection refused by dgx-a100-07 and gpu-box-3") == "connection refused by <host> and <host>"
    assert s.text("vllm.entrypoints.openai.api_server on vllm") == "vllm.entrypoints.openai.api_server on vllm"


def test_numbers_and_booleans_pass_untouched(s):
    row = {"t_ns": 7673482772604, "wall_time_s": 1796027833.9616358, "ok": True, "x": None, "list": [1, 2.5]}
    assert s.value(row) == row


@pytest.mark.parametrize(("name", "kind"), [
    ("api_key", "secret_shaped"), ("HF_TOKEN", "secret_shaped"), ("apiKey", "secret_shaped"),
    ("--api-key", "secret_shaped"), ("password", "secret"), ("Authorization", "secret"), ("db_secret", "secret"),
    ("host", "host"), ("head_address", "host"), ("--host", "host"), ("instance", "host"),
    ("max_tokens", None), ("prompt_tokens", None), ("tokenizer", None), ("api_key_used", "secret_shaped"),
    ("kv_cache_tokens", None), ("num_nodes", None), ("VLLM_CPU_OMP_THREADS_BIND", None),
])
def test_field_kind(name, kind):
    assert field_kind(name) == kind
