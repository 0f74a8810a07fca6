"""No secret survives `publish`, and `publish` refuses a bundle in which one would.

The properties plant secrets of every shape issue #15 reported (spaces, newlines, a leading dash, numbers,
authorization schemes, PEM blocks, env lists, JSON escaped twice, a plain-word host name) into every kind
of place of a real run (docs/runs: an interference run measured on an H200): secret-named fields, argv
lists, env dicts, Kubernetes env lists, JSON inside strings, free text in the manifest, the records, the
events and the /metrics samples' source (telemetry rows hold numbers only). Then they search every byte of the bundle for each planted
value (of a compressed file's content), plainly, JSON-escaped (once, twice) and URL-encoded.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loadproof.errors import UsageError
from loadproof.publish import publish
from loadproof.publish.leaks import encodings, find_leak, known_secrets
from loadproof.publish.sanitize import Sanitizer
from loadproof.store import files
from loadproof.store.files import ZST, read_content
from loadproof.verify import verify
from tests import bundles
from tests.unit.publish.synthetic import read_jsonl, throughput_run

REAL_RUN = bundles.one_run("h200-2026-11-30/llama-interference")  # copied plain, as a run directory holds it
PEM = "-----BEGIN PRIVATE KEY-----\n{a}\n{b}\n-----END PRIVATE KEY-----"

body = st.from_regex(r"[A-Za-z0-9]{14,24}", fullmatch=True)  # distinctive: never in a bundle by chance
word = st.from_regex(r"[a-z]{4,8}", fullmatch=True)
host_word = st.from_regex(r"[ghjkmnpqrstvwxz]{5,8}", fullmatch=True)  # a plain word, no vowels: no clash


@st.composite
def secret(draw) -> tuple[str, list[str]]:
    """(the secret, the pieces of it that must not survive anywhere)."""
    b = draw(body)
    shape = draw(st.sampled_from(["token", "spaces", "dash", "newline", "scheme", "basic", "pem", "quote"]))
    if shape == "spaces":
        words = draw(st.lists(word, min_size=3, max_size=4))
        value = " ".join(words[:-1] + [b])
        return value, [value, b]
    if shape == "dash":
        return "-" + b, ["-" + b, b]
    if shape == "newline":
        other = draw(body)
        return f"{b}\n{other}", [b, other]
    if shape == "scheme":
        scheme = draw(st.sampled_from(["Token", "Bearer", "Digest response="]))
        return f"{scheme} {b}", [b]
    if shape == "basic":
        credential = base64.b64encode(f"alice:{b}".encode()).decode().rstrip("=")
        return f"Basic {credential}", [credential]
    if shape == "pem":
        other = draw(body)
        return PEM.format(a=b, b=other), [b, other]
    if shape == "quote":
        return f'{b}"x\\y', [b]
    return b, [b]


def fragments(value: str) -> list[str]:
    """The value as free text puts it after a secret-named name, in every form the value allows."""
    forms = [f"--api-key '{value}'", f"private_key: '{value}'"] if "'" not in value else []
    if '"' not in value:
        forms += [f'password="{value}"', f'{{"api_key": "{value}"}}']
    if "\n" not in value:
        forms += [f"Authorization: {value}", f"secret: {value}"]
    if not any(c.isspace() for c in value):
        forms += [
            f"key={value}",
            f"curl -u alice:{value} -s",
            f"Cookie: session={value}",
            f"Bearer {value}",
            f"--api-key {value} --port 8000",
            f"Authorization: Token {value}",
            f"HF_TOKEN={value}",
        ]
    forms.append(json.dumps(json.dumps({"api_key": value}))[1:-1])  # {\"api_key\": \"...\"}: JSON escaped twice
    return forms


def plant(run: Path, value: str, number: int, host: str) -> None:
    """The secret, the number and the host name, in every kind of place a run has."""
    text = "\n".join(fragments(value))
    manifest = json.loads((run / "manifest.json").read_text())
    serving = manifest["profile"]["serving"]
    serving["host"] = host
    serving["env"] |= {"VLLM_API_KEY": value, "DB_PASS": value}
    serving["extra_args"] = ["--api-key", value, "--port", "8000", "--host", host]
    serving["k8s_env"] = [{"name": "HF_TOKEN", "value": value}, {"name": "PORT", "value": "8000"}]
    manifest["target"]["url"] = f"http://{host}:8000/v1"
    manifest["profile"]["description"] += f" served by {host}\n{text}"
    manifest["api_key"] = value
    manifest["db"] = {"password": number, "pw": value, "db_pass": value}
    manifest["notes"] = [f"{host}: NCCL INFO ring 0", text, {host: 1}]
    (run / "manifest.json").write_text(json.dumps(manifest))
    edit_rows(run / "requests.jsonl", lambda row: row | {"error_message": f"{row['error_message']} on {host}\n{text}"})
    edit_rows(run / "events.jsonl", lambda row: row | {"note": f"{host} said\n{text}", "password": number})
    edit_rows(run / "metrics.jsonl", lambda row: row | {"source": f"{host}:8000\n{text}"})


def edit_rows(path: Path, edit: Any) -> None:
    path.write_text("".join(json.dumps(edit(row)) + "\n" for row in read_jsonl(path)))


def forms(needle: str) -> set[bytes]:
    once = {json.dumps(needle)[1:-1], json.dumps(needle, ensure_ascii=False)[1:-1]}
    twice = {json.dumps(f)[1:-1] for f in once}
    return {f.encode() for f in {needle, quote(needle), quote(needle, safe=""), quote_plus(needle)} | once | twice}


def whole(data: bytes, needle: bytes, word_chars: bytes) -> bool:
    i = data.find(needle)
    while i >= 0:
        end = i + len(needle)
        if (i == 0 or data[i - 1] not in word_chars) and (end == len(data) or data[end] not in word_chars):
            return True
        i = data.find(needle, i + 1)
    return False


ALNUM = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted=secret(), number=st.integers(10**8, 10**12), host=host_word)
# issue #25, drawn on a fresh clone: `--api-key -000000000000PW` kept its value (`PW` names a secret, so the
# value was taken for a flag), and the leak guard refused the publish
@example(planted=("-000000000000PW", ["-000000000000PW", "000000000000PW"]), number=10**8, host="ghjkm")
def test_no_planted_secret_survives_publish_of_a_real_run(planted, number, host):
    value, pieces = planted
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "src" / REAL_RUN.name
        bundles.plain_copy(REAL_RUN, run)
        plant(run, value, number, host)
        publish([run], Path(tmp) / "bundle")
        files = sorted(p for p in (Path(tmp) / "bundle").rglob("*") if p.is_file())
        for path in files:
            data = read_content(path)  # what a reader gets: a compressed file's content, not its bytes
            for piece in pieces:
                for form in forms(piece):
                    assert form not in data, f"{piece!r} survived as {form!r} in {path.name}"
            assert not whole(data, str(number).encode(), ALNUM), f"{number} survived in {path.name}"
            assert not whole(data.lower(), host.encode(), ALNUM + b"_"), f"{host} survived in {path.name}"
        assert verify(Path(tmp) / "bundle").ok


class Leaky(Sanitizer):
    """A sanitizer broken on purpose, the way a future bug might break it."""

    def __init__(self, how: str) -> None:
        super().__init__(include_this_machine=False)
        self.how = how

    def declared(self, obj: Any, node: Any, name: str | None = None) -> Any:
        return obj if self.how == "nothing" else super().declared(obj, node, name)

    def text(self, s: str) -> str:
        if self.how == "no text":
            return s
        if self.how == "no hosts":
            known, self._known = self._known, set()
            try:
                return super().text(s)
            finally:
                self._known = known
        return super().text(s)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted=secret(), host=host_word, how=st.sampled_from(["nothing", "no text", "no hosts", "environment"]))
def test_publish_refuses_a_bundle_a_secret_would_survive_in(planted, host, how):
    value, pieces = planted
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "src" / REAL_RUN.name
        bundles.plain_copy(REAL_RUN, run)
        environment = {}
        if how == "environment":
            # a key only the environment knows of, bare (no `Basic`, no PEM armour) where no name marks it,
            # in free text (a field declared text: publish.fields)
            value = pieces[0]
            environment = {"LOADPROOF_TEST_API_KEY": value}
            edit_rows(run / "requests.jsonl", lambda row: row | {"error_message": f"answered {value} fine"})
            sanitizer = Sanitizer(include_this_machine=False)
        else:
            plant(run, value, 123456789, host)
            sanitizer = Leaky(how)
        out = Path(tmp) / "out" / "bundle"
        with mock.patch.dict(os.environ, environment), pytest.raises(UsageError) as refused:
            publish([run], out, sanitizer=sanitizer)
        message = str(refused.value)
        assert message.startswith("publish refused, no bundle written: runs/"), message
        assert "\n" not in message and value not in message and host not in message
        for piece in value.split():
            assert len(piece) < 4 or piece not in message
        assert not out.exists() and list(out.parent.iterdir()) == []  # no bundle, no staging folder


def test_a_clean_run_with_this_machine_named_like_a_word_publishes(tmp_path, monkeypatch):
    from loadproof.publish import sanitize

    # a machine called "samples": a word of the raw-data note publish writes itself
    monkeypatch.setattr(sanitize, "this_machine", lambda: ("samples", "samples.acme.lab"))
    run = tmp_path / "src" / REAL_RUN.name
    bundles.plain_copy(REAL_RUN, run)
    publish([run], tmp_path / "bundle")
    assert verify(tmp_path / "bundle").ok


def test_a_token_count_distribution_is_a_count_not_a_secret(tmp_path):
    """`--output-tokens uniform:8:24` sits under a count-like name (`*_tokens`): it stays as it is, and the
    run publishes (it was taken for a secret, and the leak guard refused the whole bundle)."""
    run = tmp_path / "src" / REAL_RUN.name
    bundles.plain_copy(REAL_RUN, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["options"].update(output_tokens="uniform:8:24", input_tokens="lognormal:512:0.6")
    (run / "manifest.json").write_text(json.dumps(manifest))
    publish([run], tmp_path / "bundle")
    (published,) = (tmp_path / "bundle").glob("runs/*/manifest.json")
    options = json.loads(published.read_text())["options"]
    assert (options["output_tokens"], options["input_tokens"]) == ("uniform:8:24", "lognormal:512:0.6")
    assert verify(tmp_path / "bundle").ok


def sample_files() -> list[Path]:
    """Each file of the sample's runs (tests/bundles.py) by the name it has plain (`requests.jsonl`, whether it
    is stored so or compressed)."""
    return sorted({path.with_name(path.name.removesuffix(ZST)) for run in bundles.runs() for path in run.iterdir()})


def test_the_real_runs_hold_no_secret_named_field_but_the_probe_key():
    from loadproof.publish.sanitize import field_kind

    names: set[str] = set()

    def walk(obj: Any) -> None:
        if isinstance(obj, dict):
            names.update(obj)
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    for path in sample_files():
        if path.suffix == ".json":
            walk(json.loads(path.read_text()))
        elif path.suffix == ".jsonl":
            for row in read_jsonl(path)[:50]:
                walk(row)
    assert len(names) > 200
    # the probe's question (`session 870`): published all the same, capacity's catalog entry declares it text
    assert {n for n in names if field_kind(n) == "secret"} == {"key"}
    assert {
        "prompt_tokens",
        "output_tokens",
        "tokens",
        "first_token_ns",
        "max_num_batched_tokens",
        "prompt_tokens_total",
        "session_tokens",
    } <= {n for n in names if field_kind(n) == "count"}


def test_every_number_of_the_real_runs_survives_sanitizing():
    sanitizer = Sanitizer(include_this_machine=False)

    def numbers(obj: Any, path: str = "") -> list[tuple[str, Any]]:
        if isinstance(obj, dict):
            return [n for k, v in obj.items() for n in numbers(v, f"{path}/{k}")]
        if isinstance(obj, list):
            return [n for i, v in enumerate(obj) for n in numbers(v, f"{path}/{i}")]
        return [(path, obj)] if isinstance(obj, (int, float)) and not isinstance(obj, bool) else []

    checked = 0
    for path in sample_files():
        rows = (
            [json.loads(path.read_text())]
            if path.name == "manifest.json"
            else read_jsonl(path)[:50]
            if path.suffix == ".jsonl"
            else []
        )
        for row in rows:
            before = numbers(row)
            assert numbers(sanitizer.value(row)) == before, path
            checked += len(before)
    assert checked > 10_000


# the check itself ------------------------------------------------------------------------------------


REAL_RUNS = bundles.runs()  # a run of every kind published (tests/bundles.py)


@pytest.mark.parametrize("run", REAL_RUNS, ids=[bundles.label(r) for r in REAL_RUNS])
def test_every_real_run_publishes_again(run, tmp_path, monkeypatch):
    # nothing in a real run is mistaken for a leak, and sanitizing it again moves no claim (publish checks)
    monkeypatch.setattr(files, "COMPRESSION_LEVEL", 1)  # what is compressed, not how small: level 19 costs 10x
    publication = publish([run], tmp_path / "bundle")
    assert publication.runs[0].num_claims > 10 and verify(tmp_path / "bundle").ok


def test_find_leak_sees_every_encoding_and_names_file_and_kind_without_the_value(tmp_path):
    value = 'Zx9 local "key"/ü'
    for i, form in enumerate(sorted(encodings(value))):
        folder = tmp_path / str(i)
        (folder / "runs").mkdir(parents=True)
        (folder / "runs" / "manifest.json").write_bytes(b'{"note": "' + form + b'"}')
        leak = find_leak(folder, {value: "the value of the environment variable X"}, set())
        assert leak == "runs/manifest.json holds the value of the environment variable X", form
    twice = json.dumps(json.dumps(value)[1:-1])[1:-1]  # Zx9 local \\\"key\\\"/\\u00fc
    assert {quote(value).encode(), quote_plus(value).encode(), twice.encode()} <= encodings(value)


def test_find_leak_looks_for_hosts_as_whole_words_and_plain_words_in_data_only(tmp_path):
    (tmp_path / "report.md").write_text("window of the dgx run")
    (tmp_path / "a.jsonl").write_text('{"h": "dgxs and xdgx and dgx_1"}\n')
    assert find_leak(tmp_path, {}, {"dgx"}) is None
    (tmp_path / "b.jsonl").write_text('{"h": "DGX: NCCL INFO"}\n')
    assert find_leak(tmp_path, {}, {"dgx"}) == "b.jsonl holds a host name or address of this machine or of the runs"
    (tmp_path / "b.jsonl").unlink()
    (tmp_path / "report.md").write_text("ran on gpu7.acme.lab")
    assert find_leak(tmp_path, {}, {"gpu7.acme.lab"}).startswith("report.md holds")


def test_numbers_are_looked_for_as_whole_numbers(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"t_ns": 9123456789, "sum": "ab123456789cd"}\n')
    assert find_leak(tmp_path, {"123456789": "x"}, set()) is None
    (tmp_path / "a.jsonl").write_text('{"n": 123456789}\n')
    assert find_leak(tmp_path, {"123456789": "x"}, set()) == "a.jsonl holds x"


def test_known_secrets_skips_what_is_not_a_secret_and_reads_the_environment():
    sanitizer = Sanitizer(include_this_machine=False)
    sanitizer.value(
        {
            "password": "abc",
            "token": "true",
            "api_key_env": "MY_KEY_VAR",
            "auth": "VLLM_API_KEY",
            "pin": 1234,
            "key": "Token 9f8e7d6c5b4a",
            "secret": 12345,
            "passwd": 1234567,
            "note": "first token: 0.52 s",
            "pw": "1234abcdefgh",
        }
    )
    environ = {
        "MY_KEY_VAR": "from-the-named-variable",
        "HF_TOKEN": "hf-Zx9-local-77",
        "PWD": "/work/x",
        "MAX_TOKENS": "128",
        "HOME": "/root",
        "VLLM_API_KEY": "EMPTY",
        "OPENAI_API_KEY": "test",
    }
    found = known_secrets(sanitizer, environ)
    assert set(found) == {
        "Token 9f8e7d6c5b4a",
        "9f8e7d6c5b4a",
        "1234567",
        "from-the-named-variable",
        "hf-Zx9-local-77",
        "1234abcdefgh",
    }
    assert found["hf-Zx9-local-77"] == "the value of the environment variable HF_TOKEN"
    assert "MY_KEY_VAR" in found["from-the-named-variable"]


def test_publish_refuses_when_a_key_from_the_environment_is_in_the_data(tmp_path):
    run = throughput_run(tmp_path / "src")
    rows = read_jsonl(run / "requests.jsonl")
    (run / "requests.jsonl").write_text(
        "".join(json.dumps(r | {"error_message": "used Zx9-local-key-77 ok"}) + "\n" for r in rows)
    )
    with mock.patch.dict(os.environ, {"MY_SERVICE_TOKEN": "Zx9-local-key-77"}):
        with pytest.raises(
            UsageError,
            match=r"^publish refused, no bundle written: runs/[^ ]+/requests.jsonl.zst holds "
            r"the value of the environment variable MY_SERVICE_TOKEN",
        ):
            publish([run], tmp_path / "bundle", sanitizer=Sanitizer(include_this_machine=False))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
    publish([run], tmp_path / "bundle", sanitizer=Sanitizer(include_this_machine=False))  # without it: fine
