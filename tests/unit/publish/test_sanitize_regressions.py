"""Every leak reported in issue #15 (Trust, sanitizer part), pinned with its exact input.

Each case names the secret that must be gone and the text around it that must stay.
"""

from __future__ import annotations

import json

import pytest

from loadproof.publish import sanitize
from loadproof.publish.sanitize import Sanitizer

PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "-----END PRIVATE KEY-----"
)


@pytest.fixture
def s():
    return Sanitizer(include_this_machine=False)


# (input, secrets that must be gone, text that must stay)
TEXT_CASES = [
    (
        'extra_args: ["--api-key", "correct horse battery staple"]',
        ["correct horse battery staple", "horse"],
        ['extra_args: ["--api-key", "'],
    ),
    ('env.VLLM_API_KEY: "Zx9 local key"', ["Zx9 local key", "Zx9", "local key"], ['env.VLLM_API_KEY: "']),
    ("--api-key 'my secret key'", ["my secret key", "my secret", "key'"], ["--api-key '"]),
    (
        f"private_key: {json.dumps(PEM)}",
        ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"],
        ["private_key: "],
    ),
    (
        f"config follows\n{PEM}\nend",
        ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"],
        ["config follows\n", "\nend"],
    ),
    ("--api-key -Xk2abcdEFGH", ["Xk2abcdEFGH"], ["--api-key "]),
    ("vllm serve m --api-key -Xk2abcdEFGH --port 8000", ["Xk2abcdEFGH"], ["vllm serve m --api-key ", "--port 8000"]),
    ('{"password": 12345678}', ["12345678"], ['{"password": ']),
    (
        "pw=hunter2x db_pass=hunter3x DB_PASS=hunter4x",
        ["hunter2x", "hunter3x", "hunter4x"],
        ["pw=", "db_pass=", "DB_PASS="],
    ),
    ("Authorization: Token 9f8e7d6c5b4a", ["9f8e7d6c5b4a", "Token"], ["Authorization: "]),
    ("Authorization: Basic dXNlcjpwYXNz", ["dXNlcjpwYXNz"], ["Authorization: "]),
    ("sent Basic dXNlcjpwYXNz upstream", ["dXNlcjpwYXNz"], ["sent Basic ", " upstream"]),
    (
        'Proxy-Authorization: Digest username="a", response="6629fae49393a053"',
        ["6629fae49393a053"],
        ["Proxy-Authorization: "],
    ),
    ("Cookie: session=abcdef1234567", ["abcdef1234567"], ["Cookie: "]),
    ("Set-Cookie: sid=abcdef1234567; Path=/", ["abcdef1234567"], ["Set-Cookie: "]),
    ("curl -u alice:hunter2 http://h/v1/models", ["hunter2", "alice:"], ["curl -u "]),
    ("curl --user alice:hunter2 -s", ["hunter2"], ["curl --user ", " -s"]),
    ("key=abcdefgh1234", ["abcdefgh1234"], ["key="]),
    ("Bearer abc!def12345", ["abc!def12345", "def12345"], ["Bearer "]),
    (
        '{"env":[{"name":"VLLM_API_KEY","value":"Zx9 local key"}]}',
        ["Zx9 local key"],
        ['{"env":[{"name":"VLLM_API_KEY","value":"'],
    ),
    (
        "env:\n- name: HF_TOKEN\n  value: hf-but-not-shaped-1234\n- name: PORT\n  value: 8000",
        ["hf-but-not-shaped-1234"],
        ["- name: HF_TOKEN\n  value: ", "- name: PORT\n  value: 8000"],
    ),
    ('{\\"api_key\\": \\"abcdef123456\\"}', ["abcdef123456"], ['{\\"api_key\\": \\"']),
    ('{\\\\\\"api_key\\\\\\": \\\\\\"abcdef123456\\\\\\"}', ["abcdef123456"], ['{\\\\\\"api_key\\\\\\": ']),
    # an escaped quote inside the escaped value
    ('{\\"password\\": \\"qx\\\\\\"zz word\\"}', ["qx", "zz word"], ['{\\"password\\": \\"']),
    # issue #25: a value starting with `-` whose words name a secret (`PW`) is the flag's value, not a flag
    ("--api-key -000000000000PW --port 8000", ["000000000000PW"], ["--api-key ", " --port 8000"]),
    ("curl -u alice:-000000000000PW -s", ["000000000000PW", "alice"], ["curl -u ", " -s"]),
]


@pytest.mark.parametrize(("text", "gone", "kept"), TEXT_CASES, ids=[c[0][:40] for c in TEXT_CASES])
def test_reported_text_leaks_are_closed(s, text, gone, kept):
    clean = s.text(text)
    assert "<secret>" in clean
    for secret in gone:
        assert secret not in clean, (secret, clean)
    for part in kept:
        assert part in clean, (part, clean)


def test_reported_structural_leaks_are_closed(s):
    run = {
        "profile": {
            "serving": {
                "extra_args": ["--api-key", "correct horse battery staple", "--port", "8000"],
                "env": {"VLLM_API_KEY": "Zx9 local key", "VLLM_LOGGING_LEVEL": "INFO"},
            },
            "tls": {"private_key": PEM, "cert_file": "server.pem"},
        },
        "launch": ["vllm", "serve", "m", "--api-key", "-Xk2abcdEFGH", "--port", "8000"],
        "db": {"password": 12345678, "pw": "x y z", "db_pass": "a\nb", "DB_PASS": 3.5, "port": 5432},
        "headers": {"Authorization": "Token 9f8e7d6c5b4a", "Cookie": "session=abcdef1234567", "Accept": "*/*"},
        "k8s": {"env": [{"name": "VLLM_API_KEY", "value": "..."}, {"name": "PORT", "value": "8000"}]},
        "curl": ["curl", "-u", "alice:hunter2", "-s"],
    }
    assert s.value(run) == {
        "profile": {
            "serving": {
                "extra_args": ["--api-key", "<secret>", "--port", "8000"],
                "env": {"VLLM_API_KEY": "<secret>", "VLLM_LOGGING_LEVEL": "INFO"},
            },
            "tls": {"private_key": "<secret>", "cert_file": "server.pem"},
        },
        "launch": ["vllm", "serve", "m", "--api-key", "<secret>", "--port", "8000"],
        "db": {"password": "<secret>", "pw": "<secret>", "db_pass": "<secret>", "DB_PASS": "<secret>", "port": 5432},
        "headers": {"Authorization": "<secret>", "Cookie": "<secret>", "Accept": "*/*"},
        "k8s": {"env": [{"name": "VLLM_API_KEY", "value": "<secret>"}, {"name": "PORT", "value": "8000"}]},
        "curl": ["curl", "-u", "<secret>", "-s"],
    }


def test_a_whole_subtree_under_a_secret_name_goes():
    s = Sanitizer(include_this_machine=False)
    assert s.value(
        {
            "auth": {"user": "alice", "tokens": ["a", "b"]},
            "credentials": [1, 2],
            "secret": None,
            "api_key": "",
            "token": False,
        }
    ) == {"auth": "<secret>", "credentials": "<secret>", "secret": None, "api_key": "", "token": False}


def test_a_plain_word_host_is_learned_and_removed_everywhere():
    s = Sanitizer(include_this_machine=False)
    s.learn({"host": "dgx"})
    assert s.value({"host": "dgx"}) == {"host": "<host>"}
    assert s.text("dgx: NCCL INFO Channel 00/08 : 0 1") == "<host>: NCCL INFO Channel 00/08 : 0 1"
    assert (
        s.text("DGX rebooted; engine-dgx.log kept; dgxs stays") == "<host> rebooted; engine-<host>.log kept; dgxs stays"
    )


def test_this_machine_names_are_removed_as_plain_words(monkeypatch):
    monkeypatch.setattr(sanitize, "this_machine", lambda: ("dgx", "dgx.acme.lab", "10.1.2.3"))
    s = Sanitizer()
    assert s.text("dgx: NCCL INFO on dgx.acme.lab (10.1.2.3)") == "<host>: NCCL INFO on <host> (<ip>)"
    assert {"dgx", "dgx.acme.lab", "10.1.2.3"} <= s.known_hosts


def test_hosts_outside_any_suffix_list(s):
    assert s.text("pulled from gpu7.acme.lab:5000/vllm") == "pulled from <host>:5000/vllm"
    s.learn({"target": {"url": "http://gpu7.acme.lab:8000/v1"}})
    assert s.text("gpu7 is slow") == "<host> is slow"  # the first label of a learned name is learned too


def test_words_loadproof_uses_are_never_learned_as_hosts(s):
    s.learn({"host": "vllm", "server": "localhost", "upstream": "http://capacity:8000"})
    assert s.known_hosts == frozenset()
    assert s.text("vllm:num_requests_running capacity.verdict") == "vllm:num_requests_running capacity.verdict"


@pytest.mark.parametrize("text", ["token=" + "a" * 8000, "ab:" * 2667])
def test_the_reported_slow_inputs_are_fast(s, text):
    import time

    start = time.perf_counter()
    s.text(text)
    assert time.perf_counter() - start < 0.5  # were 4.6 s and 79 s


def test_media_an_engine_echoes_in_an_error_is_not_published(s):
    """A data set's images are private content: an engine's error that quotes a request's data URL (or a long
    base64 run of it) keeps its words and loses the file."""
    data = "iVBORw0KGgoAAAANSUhEUgAA" + "QUJDRA/+" * 60
    for text in (f"Invalid image: data:image/png;base64,{data} cannot be decoded", f"bad input {data}"):
        out = s.text(text)
        assert data[:40] not in out and "<media>" in out and ("Invalid image" in out or "bad input" in out)
    assert s.text("sha256 " + "ab" * 32) == "sha256 " + "ab" * 32  # a hash is shorter than any media run
