"""publish(): what a bundle holds, what it leaves out, and the runs it refuses."""

import hashlib
import json
import math

import pytest

from loadproof.errors import UsageError
from loadproof.metrics.claims import Claim
from loadproof.publish import publish
from loadproof.publish.bundle import claims_difference
from loadproof.publish.sanitize import Sanitizer
from loadproof.store.files import read_content
from loadproof.verify import verify
from tests.unit.publish.synthetic import HAND_CAPACITY, HAND_THROUGHPUT, capacity_run, read_jsonl, throughput_run

RUN = "runs/throughput-20261130-083713-1022"


@pytest.fixture
def bundle(tmp_path):
    publish(
        [throughput_run(tmp_path / "src"), capacity_run(tmp_path / "src")],
        tmp_path / "bundle",
        engine_image="vllm/vllm-openai@sha256:" + "ab" * 32,
    )
    return tmp_path / "bundle"


def test_bundle_layout_and_checksums(bundle):
    files = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    expected_run_files = {
        "manifest.json",
        "requests.jsonl.zst",  # the records compressed; manifest, claims and report plain
        "chunks.jsonl.zst",
        "metrics.jsonl.zst",
        "events.jsonl.zst",
        "claims.json",
        "report.md",
    }
    assert {f.split("/", 2)[2] for f in files if f.startswith(RUN)} == expected_run_files | {"telemetry.jsonl.zst"}
    assert "bundle.json" in files and "SHA256SUMS" in files
    # sha256sum -c format, every file but itself, sorted; checked here with hashlib
    lines = (bundle / "SHA256SUMS").read_text().splitlines()
    listed = [line.split("  ", 1)[1] for line in lines]
    assert listed == sorted(f for f in files if f != "SHA256SUMS")
    for line in lines:
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((bundle / name).read_bytes()).hexdigest() == digest
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["format_version"] == 1 and meta["loadproof_version"]
    assert [r["path"] for r in meta["runs"]] == [RUN, "runs/capacity-20261130-083825-4a9e"]


def test_published_claims_are_the_hand_computed_figures(bundle):
    for run, hand in ((RUN, HAND_THROUGHPUT), ("runs/capacity-20261130-083825-4a9e", HAND_CAPACITY)):
        claims = {c["name"]: c for c in json.loads((bundle / run / "claims.json").read_text())["claims"]}
        for name, (printed, value) in hand.items():
            assert claims[name]["printed"] == printed, name
            if isinstance(value, str):
                assert claims[name]["value"] == value
            else:
                assert math.isclose(claims[name]["value"], value, rel_tol=1e-9), name
    assert verify(bundle).ok


def test_model_output_is_dropped_and_probe_answers_kept_as_planted_values(bundle):
    rows = read_jsonl(bundle / RUN / "requests.jsonl")
    assert rows and all("output_text" not in row for row in rows)
    assert b"Lisbon" not in read_content(bundle / RUN / "requests.jsonl.zst")
    cap = read_jsonl(bundle / "runs/capacity-20261130-083825-4a9e/requests.jsonl")
    assert [r["output_text"] for r in cap] == ["6693470", "6693471"]  # the plan's expected values, nothing more
    assert b"secret code" not in read_content(bundle / "runs/capacity-20261130-083825-4a9e/requests.jsonl.zst")


def test_manifest_is_sanitized_and_carries_provenance(bundle):
    manifest = json.loads((bundle / RUN / "manifest.json").read_text())
    assert manifest["target"]["url"] == "<url>"
    assert manifest["target"]["tokenizer"] == "<path>"
    assert manifest["target"]["model"] == "meta-llama/Llama-3.1-8B"
    assert manifest["profile"]["serving"]["host"] == "<host>"
    assert manifest["profile"]["serving"]["env"] == {"HF_TOKEN": "<secret>", "VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    assert manifest["profile"]["parallel"]["head_address"] == "<ip>"  # an address in a host field keeps its type
    assert manifest["engine"]["launch"][-6:] == ["--host", "<host>", "--api-key", "<secret>", "--port", "8000"]
    provenance = manifest["publication"]
    assert provenance["engine_version"] == "0.32.0" and provenance["torch"] == "2.8.0"
    assert provenance["driver"] == "570.86.15" and provenance["gpu_models"] == ["NVIDIA H200"]
    assert provenance["engine_image"].startswith("vllm/vllm-openai@sha256:abab")
    everything = b"".join(p.read_bytes() for p in bundle.rglob("*") if p.is_file())
    for private in (b"127.0.0.1", b"10.20.30.40", b"10.0.0.5", b"gpu-node-07", b"alice", b"hf_AbCd", b"sk-live"):
        assert private not in everything, private


def test_answers_are_carried_when_present(tmp_path):
    run = throughput_run(tmp_path / "src")
    (run / "answers.jsonl").write_text(
        json.dumps(
            {
                "suite": "gsm8k",
                "item_id": "gsm8k-0007",
                "extracted": "72",
                "expected": "72",
                "correct": True,
                "skipped": "scored on gpu-node-07",
            }
        )
        + "\n"
    )
    publish([run], tmp_path / "bundle")
    rows = read_jsonl(tmp_path / "bundle" / RUN / "answers.jsonl")
    assert rows == [
        {
            "suite": "gsm8k",
            "item_id": "gsm8k-0007",
            "extracted": "72",
            "expected": "72",
            "correct": True,
            "skipped": "scored on <host>",
        }
    ]
    assert verify(tmp_path / "bundle").ok


def test_refuses_a_non_empty_output_folder(tmp_path):
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "old.txt").write_text("x")
    with pytest.raises(UsageError, match="already exists and is not empty"):
        publish([throughput_run(tmp_path / "src")], tmp_path / "bundle")


def test_an_empty_output_folder_is_fine(tmp_path):
    (tmp_path / "bundle").mkdir()
    publish([throughput_run(tmp_path / "src")], tmp_path / "bundle")
    assert verify(tmp_path / "bundle").ok


def test_refuses_a_run_that_does_not_load_and_leaves_nothing(tmp_path):
    with pytest.raises(UsageError, match="no run directory"):
        publish([tmp_path / "missing"], tmp_path / "bundle")
    run = throughput_run(tmp_path / "src")
    (run / "manifest.json").write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        publish([run], tmp_path / "bundle")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_refuses_a_run_whose_claims_cannot_be_computed(tmp_path):
    run = capacity_run(tmp_path / "src")
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["plan"]["window_s"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match="claims cannot be computed"):
        publish([run], tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()


def test_refuses_the_same_run_twice(tmp_path):
    run = throughput_run(tmp_path / "src")
    with pytest.raises(UsageError, match="same run given twice"):
        publish([run, run], tmp_path / "bundle")


def test_refuses_when_sanitizing_would_change_a_claim(tmp_path):
    # two families that differ only by a host name collapse into one when sanitized: the claims change
    run = throughput_run(tmp_path / "src")
    rows = read_jsonl(run / "requests.jsonl")
    for i, row in enumerate(rows):
        row["family"] = f"english-on-node{i % 2}.corp.example.com"
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UsageError, match="sanitizing changed a claim"):
        publish([run], tmp_path / "bundle")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_claims_difference_allows_only_placeholder_renames():
    sanitizer = Sanitizer(include_this_machine=False)
    a = Claim("throughput.x.c1.decode_tokens_per_s", 7.3, "tokens/s", "7.3", "f", "figure", "neither")
    assert claims_difference([a], [a], sanitizer) is None
    renamed = Claim("throughput.<host>.c1.decode_tokens_per_s", 7.3, "tokens/s", "7.3", "f", "figure", "neither")
    assert claims_difference([a], [renamed], sanitizer) is None
    other = Claim("throughput.y.c1.decode_tokens_per_s", 7.3, "tokens/s", "7.3", "f", "figure", "neither")
    assert "became" in claims_difference([a], [other], sanitizer)
    moved = Claim(a.name, 7.31, "tokens/s", "7.3", "f", "figure", "neither")
    assert "after sanitizing" in claims_difference([a], [moved], sanitizer)
    reason = Claim(
        "quality.skipped",
        "no tokenizer at /home/a/t.json",
        "",
        "no tokenizer at /home/a/t.json",
        "f",
        "fact",
        "neither",
    )
    clean = Claim("quality.skipped", "no tokenizer at <path>", "", "no tokenizer at <path>", "f", "fact", "neither")
    assert claims_difference([reason], [clean], sanitizer) is None


def test_claims_difference_never_prints_a_private_string():
    sanitizer = Sanitizer(include_this_machine=False)
    before = Claim(
        "throughput.en Authorization: Token 9f8e7d6c5b4a",
        "at /home/alice/x",
        "",
        "at /home/alice/x",
        "f",
        "fact",
        "neither",
    )
    one = Claim("throughput.y", 1, "", "1", "f", "figure", "neither")
    assert "9f8e7d6c5b4a" not in claims_difference([before], [one], sanitizer)
    changed = claims_difference([before], [Claim(before.name, "other", "", "other", "f", "fact", "neither")], sanitizer)
    assert "after sanitizing" in changed and "9f8e7d6c5b4a" not in changed and "alice" not in changed
