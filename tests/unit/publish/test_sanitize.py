"""The sanitizer on hand-picked values: what goes, under which placeholder, and what must stay."""

import pytest

from loadproof.publish.sanitize import Sanitizer, field_kind


@pytest.fixture
def s():
    return Sanitizer(include_this_machine=False)


@pytest.mark.parametrize(
    "text",
    [
        "meta-llama/Llama-3.1-8B",
        "embedded:gemma3-270m",
        "Qwen/Qwen2.5-7B-Instruct",
        "0.32.0",
        "550.54.15",
        "vllm:num_requests_running",
        "throughput.english.c1.decode_tokens_per_s",
        "capacity.verdict",
        "report.md",
        "[kv_cache_utils.py:2327]",
        "INFO 11-30 08:37:02 CPU KV cache size: 991,390 tokens",
        "29ca9dcaf49085392a98eab2c9ac6693110f433e-dirty",
        "2026-11-30T08:37:13Z",
        "/v1/chat/completions",
        "/metrics",
        "vllm.entrypoints.openai.api_server",
        "session 878",
        "max_tokens=128",
        "first token at 0.52 s",
        "tokens/s",
        "std::vector",
        "runs/throughput-20261130-083713-1022",
        "docker.io/vllm/vllm-openai:v0.6.3",
        "vllm/vllm-openai@sha256:" + "ab" * 32,
        "usage.prompt_tokens == 1536 for 4/4 sessions",
        "e.g. this",
        # dotted names that are not hosts: an item id and its mode, code, claim names, files
        "gsm8k-test-0003.plain",
        "zh-arith-01.low-thinking",
        "asyncio.TimeoutError",
        "torch.cuda.OutOfMemoryError",
        "capacity.criteria.running",
        "model.safetensors",
        "KeyError: 'window_s'",
        "SGLang KV Cache is allocated. #tokens: 1,234",
        "Maximum concurrency for 131,072 tokens per request: 7.56x",
        "GPU KV cache size: 991,390 tokens",
    ],
)
def test_legitimate_values_stay(s, text):
    assert s.text(text) == text


@pytest.mark.parametrize(
    ("text", "clean"),
    [
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
        ("gpu7.acme.lab", "<host>"),  # three labels or more: a host unless a file, code or a public host
        ("reached node7.mycompany.prod ok", "reached <host> ok"),
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
    ],
)
def test_private_values_become_placeholders(s, text, clean):
    assert s.text(text) == clean


def test_field_names_decide_for_short_or_bare_values(s):
    manifest = {
        "key": "session 878",  # `key` is secret-named: whatever the value looks like, it goes
        "api_key": "abcdefgh1234",
        "HF_TOKEN": "hf_x",
        "password": "x",
        "db": {"secret": "p"},
        "host": "myserver",
        "head_address": "HEAD_NODE_IP",
        "serving": {"hostname": "dgx01"},
        "launch": ["--host", "gpu-node-7", "--api-key", "zzzzzzzz1", "--port", "8000"],
        "max_tokens": 5,
        "api_key_used": True,
        "prompt_tokens": 22,
        "env": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"},
    }
    assert s.value(manifest) == {
        "key": "<secret>",
        "api_key": "<secret>",
        "HF_TOKEN": "<secret>",
        "password": "<secret>",
        "db": {"secret": "<secret>"},
        "host": "<host>",
        "head_address": "<host>",
        "serving": {"hostname": "<host>"},
        "launch": ["--host", "<host>", "--api-key", "<secret>", "--port", "8000"],
        "max_tokens": 5,
        "api_key_used": True,
        "prompt_tokens": 22,
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


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("api_key", "secret"),
        ("HF_TOKEN", "secret"),
        ("apiKey", "secret"),
        ("--api-key", "secret"),
        ("token", "secret"),
        ("key", "secret"),
        ("private_key", "secret"),
        ("X-Api-Key", "secret"),
        ("hfToken", "secret"),
        ("key2", "secret"),
        ("password", "secret"),
        ("Authorization", "secret"),
        ("Proxy-Authorization", "secret"),
        ("db_secret", "secret"),
        ("pw", "secret"),
        ("db_pass", "secret"),
        ("DB_PASS", "secret"),
        ("Set-Cookie", "secret"),
        ("dbPassword", "secret"),
        ("env.VLLM_API_KEY", "secret"),
        ("oauth", "secret"),
        ("sessionid", "secret"),
        # token/key as counts: plural, not the last word, or beside a count word
        ("max_tokens", "count"),
        ("prompt_tokens", "count"),
        ("tokens", "count"),
        ("kv_cache_tokens", "count"),
        ("first_token_ns", "count"),
        ("token_count", "count"),
        ("tokens_per_s", "count"),
        ("num_tokens", "count"),
        ("api_key_used", "count"),
        ("keys", "count"),
        ("max_num_batched_tokens", "count"),
        ("host", "host"),
        ("head_address", "host"),
        ("--host", "host"),
        ("instance", "host"),
        ("MASTER_ADDR", "host"),
        ("tokenizer", None),
        ("num_nodes", None),
        ("VLLM_CPU_OMP_THREADS_BIND", None),
        ("KeyError", None),
        ("authored", None),
        ("session_id", None),
        ("salt", None),
        ("monkey", None),
    ],
)
def test_field_kind(name, kind):
    assert field_kind(name) == kind


def test_a_count_keeps_numbers_and_loses_anything_else(s):
    assert s.value({"max_tokens": 128, "tokens": [1, 2, 3], "num_tokens": "1,024", "api_key_used": True}) == {
        "max_tokens": 128,
        "tokens": [1, 2, 3],
        "num_tokens": "1,024",
        "api_key_used": True,
    }
    assert s.value({"max_tokens": "sk-abc 123", "tokens": ["9f8e7d6c"]}) == {
        "max_tokens": "<secret>",
        "tokens": ["<secret>"],
    }
    assert s.text("max_tokens=128 tokens: 1,536 for 4 sessions") == "max_tokens=128 tokens: 1,536 for 4 sessions"
    assert s.text("max_tokens=12ab34cd") == "max_tokens=<secret>"


def test_a_bare_token_or_key_in_prose_loses_what_follows(s):
    # "token" alone is secret-named; a figure after it is lost rather than risk a key
    assert s.text("first token: 0.52 s") == "first token: <secret>"
