"""Property: private things planted in every string of a run (values and keys, every file) never reach the bundle.

Hypothesis draws addresses, hostnames, URLs, e-mails, host paths and keys, plants them into every
string field of a synthetic throughput run (manifest, records, events, /metrics samples), and as dict
keys wherever a run directory leaves a map open (the manifest's top level, profile, options, an event's
fields), publishes, and then searches the bytes of every bundle file
for each planted string and for its distinctive part (the user name of a path, the body of a key,
the first label of a host). The claims must still verify and still equal the hand-computed figures.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loadproof.publish import publish
from loadproof.records import RequestRecord
from loadproof.rundir import EngineSample
from loadproof.store.run_dir import RunWriter
from loadproof.verify import verify
from tests.unit.publish.synthetic import (
    HAND_THROUGHPUT,
    telemetry_rows,
    throughput_manifest,
    throughput_records,
    write_jsonl,
)

# a planted item: (the string planted, the needles that must not appear anywhere in the bundle)
Planted = tuple[str, list[str]]

name = st.from_regex(r"[a-z][a-z0-9]{7,11}", fullmatch=True)  # distinctive: never occurs by chance
body = st.from_regex(r"[A-Za-z0-9]{20,32}", fullmatch=True)
octet = st.integers(0, 255)
suffix = st.sampled_from(["corp.example.com", "cluster.internal", "lan", "local", "example.net", "io", "corp"])


@st.composite
def ipv4(draw) -> Planted:
    address = f"{draw(st.integers(11, 223))}.{draw(octet)}.{draw(octet)}.{draw(octet)}"
    port = draw(st.sampled_from(["", ":8000", ":53407"]))
    return address + port, [address]


@st.composite
def ipv6(draw) -> Planted:
    groups = [f"{draw(st.integers(0x1000, 0xFFFF)):x}" for _ in range(8)]
    full = ":".join(groups)
    form = draw(st.sampled_from(["full", "compressed", "bracketed"]))
    if form == "compressed":
        full = ":".join(groups[:3]) + "::" + groups[7]
    planted = f"[{full}]:8000" if form == "bracketed" else full
    return planted, [full]


@st.composite
def hostname(draw) -> Planted:
    label = f"{draw(name)}-{draw(st.integers(0, 99))}"
    return f"{label}.{draw(suffix)}", [label]


@st.composite
def url(draw) -> Planted:
    host, needles = draw(st.one_of(hostname(), ipv4()))
    user = draw(name)
    scheme = draw(st.sampled_from(["http", "https", "ws", "grpc"]))
    return f"{scheme}://{host}/v1/{user}?key={draw(body)}", needles + [user]


@st.composite
def email(draw) -> Planted:
    user = draw(name)
    return f"{user}@{draw(name)}.{draw(suffix)}", [user]


@st.composite
def host_path(draw) -> Planted:
    user = draw(name)
    template = draw(
        st.sampled_from(
            [
                "/home/{u}/models/llama-3.1-8b",
                "/root/{u}",
                "/tmp/{u}/tokenizer.json",
                "/work/{u}/ckpt",
                "~/{u}/models",
                "~{u}/models/x",
                "C:\\Users\\{u}\\models",
                "/data/{u}/weights.safetensors",
            ]
        )
    )
    return template.format(u=user), [user]


@st.composite
def secret(draw) -> Planted:
    b = draw(body)
    template = draw(
        st.sampled_from(
            [
                "sk-{b}",
                "sk-proj-{b}",
                "hf_{b}",
                "ghp_{b}",
                "Bearer {b}",
                "bearer {b}",
                "api_key={b}",
                "--api-key {b}",
                "token: {b}",
                "password={b}",
                '"authorization": "Basic {b}=="',
                "xoxb-{b}",
                "nvapi-{b}",
            ]
        )
    )
    return template.format(b=b), [b]


fixed = st.sampled_from(
    [
        ("127.0.0.1", ["127.0.0.1"]),
        ("localhost:8000", ["localhost"]),
        ("::1", ["::1"]),
        ("fe80::1%eth0", ["fe80::1"]),
        ("0.0.0.0:8000", ["0.0.0.0"]),
    ]
)
planted_item = st.one_of(ipv4(), ipv6(), hostname(), url(), email(), host_path(), secret(), fixed)
separator = st.sampled_from([" ", ", ", "; ", " (", " | ", "\t", " at ", "="])


def plant_strings(
    obj: Any, dirt: str, skip: frozenset[str] = frozenset(), open_maps: frozenset[str] = frozenset(), path: str = ""
) -> Any:
    """Every string value gets `dirt` appended, and every dict at a path in `open_maps` (those a run directory
    leaves open: the manifest's top level, a profile, options) or below it gets `dirt` as one more key."""
    if isinstance(obj, dict):
        out = {
            k: (v if k in skip else plant_strings(v, dirt, skip, open_maps, f"{path}.{k}".lstrip(".")))
            for k, v in obj.items()
        }
        if path in open_maps or any(path.startswith(f"{m}.") for m in open_maps if m):
            out[dirt.strip()] = dirt
        return out
    if isinstance(obj, list):
        return [plant_strings(v, dirt, skip, open_maps, path) for v in obj]
    if isinstance(obj, str):
        return obj + dirt
    return obj


def planted_run(root: Path, dirt: str) -> Path:
    name = "throughput-20261130-083713-1022"
    manifest = plant_strings(
        throughput_manifest(name),
        dirt,
        skip=frozenset({"scenario"}),
        open_maps=frozenset({"", "profile", "options", "target.extra_body"}),
    )
    manifest["profile"]["legit"] = LEGIT  # a configuration: every string in it is sanitized as text
    with RunWriter(root / name) as writer:
        writer.write_manifest(manifest)
        for record in throughput_records():
            for field in (
                "request_id",
                "endpoint",
                "family",
                "prompt_id",
                "error_kind",
                "error_message",
                "finish_reason",
                "output_text",
            ):
                setattr(record, field, (getattr(record, field) or "") + dirt)
            writer.append(record)
        # one record outside the claims, so `scenario` is planted too
        writer.append(RequestRecord(request_id="other" + dirt, endpoint="chat" + dirt, scenario="warmup" + dirt))
        writer.event("warmup_done" + dirt, t_ns=1, **{"note": "from" + dirt, dirt.strip(): dirt})
        writer.metric_sample(EngineSample(t_ns=5, values={"num_requests_running": 1.0}, source="engine" + dirt))
    write_jsonl(root / name / "telemetry.jsonl", telemetry_rows())  # numbers only
    return root / name


LEGIT = {
    "model": "meta-llama/Llama-3.1-8B",
    "embedded": "embedded:gemma3-270m",
    "version": "0.32.0",
    "metric": "vllm:num_requests_running",
    "claim": "throughput.english.c1.decode_tokens_per_s",
    "driver": "570.86.15",
    "route": "/v1/completions",
    "git": "29ca9dcaf49085392a98eab2c9ac6693110f433e",
    "numbers": [1536, 7.3, 0.25],
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(planted_item, min_size=1, max_size=3), seps=st.lists(separator, min_size=3, max_size=3))
# found by Hypothesis: a secret's value swallowed the next secret's marker, which then went unseen
@example(items=[("--api-key 00000000000000000000", ["00000000000000000000"])], seps=[" (", " ", " "])
@example(items=[("Bearer 00000000000000000000", ["00000000000000000000"])] * 2, seps=[" ", "=", " "])
# a URL ending in `=C:\...`: the URL took the drive letter and the rest was no longer a path
@example(items=[("11.0.0.0", ["11.0.0.0"]), ("C:\\Users\\a0000000\\models", ["a0000000"])], seps=["=", "=", " "])
def test_nothing_planted_survives_and_claims_still_verify(items, seps):
    dirt = "".join(sep + planted for sep, (planted, _) in zip(seps, items))
    needles = [n for planted, ns in items for n in [planted, *ns]]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run = planted_run(root / "src", dirt)
        publish([run], root / "bundle")
        files = [p for p in (root / "bundle").rglob("*") if p.is_file()]
        for path in files:
            data = path.read_bytes()
            for needle in needles:
                assert needle.encode() not in data, f"{needle!r} survived in {path.relative_to(root)}"
                assert json.dumps(needle)[1:-1].encode() not in data, f"{needle!r} (escaped) in {path.name}"
        result = verify(root / "bundle")
        assert result.ok, [line for line in result.lines() if not line.startswith("ok")]
        manifest = json.loads(next(p for p in files if p.name == "manifest.json").read_text())
        assert manifest["profile"]["legit"] == LEGIT and manifest["scenario"] == "throughput"
        claims = json.loads(next(p for p in files if p.name == "claims.json").read_text())["claims"]
        for claim in claims:
            stem = claim["name"].split(".")
            key = (
                "throughput.english.c1.decode_tokens_per_s"
                if stem[-1] == "decode_tokens_per_s" and "c1" in stem
                else None
            )
            if key:  # the family is planted too, so match by shape; the figure is the hand-computed one
                printed, value = HAND_THROUGHPUT[key]
                assert claim["printed"] == printed and math.isclose(claim["value"], value, rel_tol=1e-9)
        assert any(c["name"].endswith("c1.decode_tokens_per_s") for c in claims)
