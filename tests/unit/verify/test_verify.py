"""verify(): a published bundle passes; any tampering with the data, the claims or the files is caught.

Every tampered number below is one that a hand computation (tests/unit/publish/synthetic.py) says
moves a claim; the checksum list is rewritten with hashlib where the test wants only the claims to speak.
"""

import json
import shutil

import pytest

from loadproof.errors import UsageError
from loadproof.publish import publish
from loadproof.verify import verify
from tests.unit.publish.synthetic import S, capacity_run, read_jsonl, reseal, throughput_run, write_jsonl

TP = "runs/throughput-20261130-083713-1022"
CAP = "runs/capacity-20261130-083825-4a9e"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    publish([throughput_run(root / "src"), capacity_run(root / "src")], root / "bundle")
    return root / "bundle"


@pytest.fixture
def bundle(published, tmp_path):
    shutil.copytree(published, tmp_path / "bundle")
    return tmp_path / "bundle"


def edit_rows(path, where, field, change):
    rows = read_jsonl(path)
    hits = [row for row in rows if where(row)]
    assert len(hits) == 1
    hits[0][field] = change(hits[0][field])
    write_jsonl(path, rows)


def mismatched(result):
    return {c.name for c in result.checks if not c.ok}


def test_a_published_bundle_verifies(bundle):
    result = verify(bundle)
    assert result.ok, result.lines()
    assert not result.problems
    assert len(result.checks) > 20
    assert result.summary().startswith("VERIFIED")
    assert "ok  throughput.english.c1.decode_tokens_per_s  7.3" in result.lines()


@pytest.mark.parametrize(
    ("file", "where", "field", "change", "claim"),
    [
        # r0's decode span 13.7 s -> 10 s: rates 10, 8, 6.25, median 8.0 instead of 7.3
        (
            f"{TP}/requests.jsonl",
            lambda r: r["request_id"] == "tp-c1-0",
            "last_token_ns",
            lambda v: v - int(3.7 * S),
            "throughput.english.c1.decode_tokens_per_s",
        ),
        # r0's TTFT 0.25 s -> 1.25 s: TTFTs 1.25, 0.2, 0.3, median 0.300 instead of 0.250
        (
            f"{TP}/requests.jsonl",
            lambda r: r["request_id"] == "tp-c1-0",
            "send_ns",
            lambda v: v - 1 * S,
            "throughput.english.c1.ttft_median_s",
        ),
        # batch 1 ends at 120 s instead of 110: 200 / 20 = 10, median (10 + 24) / 2 = 17.0 instead of 22.0
        (
            f"{TP}/requests.jsonl",
            lambda r: r["request_id"] == "tp-c4-0-3",
            "end_ns",
            lambda v: v + 10 * S,
            "throughput.english.c4.aggregate_tokens_per_s",
        ),
        # one stream of batch 2 reports 40 tokens instead of 30: mean 41.25 instead of 40.0
        (
            f"{TP}/requests.jsonl",
            lambda r: r["request_id"] == "tp-c4-1-0",
            "output_tokens",
            lambda v: v + 10,
            "throughput.english.c4.mean_output_tokens",
        ),
        # one chunk of s1 inside the window carries 4 tokens instead of 2: 20 / 4 s = 5.0, aggregate 9.5
        (
            f"{CAP}/chunks.jsonl",
            lambda r: r["request_id"] == "cap-s1",
            "tokens",
            lambda v: [4] + v[1:],
            "capacity.window_aggregate_tokens_per_s",
        ),
        # one /metrics sample inside the window shows 1 running stream instead of 2: the criterion fails
        (
            f"{CAP}/metrics.jsonl",
            lambda r: r["t_ns"] == 13 * S,
            "values",
            lambda v: {**v, "num_requests_running": 1},
            "capacity.criteria.running",
        ),
        # host memory peak 9.5 GiB -> 10.5 GiB
        (
            f"{TP}/telemetry.jsonl",
            lambda r: r["t_ns"] == 60 * S,
            "host",
            lambda v: {**v, "mem_used_bytes": v["mem_used_bytes"] + 1024**3},
            "telemetry.host_max_mem_used_gib",
        ),
        # the cancel event 12 s later: the drain is no longer seen within its 5 s bound
        (
            f"{CAP}/events.jsonl",
            lambda r: r["kind"] == "cancel",
            "t_ns",
            lambda v: v + 12 * S,
            "capacity.criteria.drain",
        ),
    ],
)
def test_a_changed_number_with_resealed_checksums_is_a_claim_mismatch(bundle, file, where, field, change, claim):
    edit_rows(bundle / file, where, field, change)
    reseal(bundle)
    result = verify(bundle)
    assert not result.problems, [p.line() for p in result.problems]  # checksums pass: only the claims tell
    assert claim in mismatched(result)
    assert not result.ok


def test_mismatch_line_names_both_figures(bundle):
    edit_rows(
        bundle / f"{TP}/requests.jsonl",
        lambda r: r["request_id"] == "tp-c1-0",
        "last_token_ns",
        lambda v: v - int(3.7 * S),
    )
    reseal(bundle)
    lines = verify(bundle).lines()
    line = next(x for x in lines if "c1.decode_tokens_per_s" in x)
    assert line.startswith("MISMATCH  throughput.english.c1.decode_tokens_per_s  published 7.3 recomputed 8.0")


@pytest.mark.parametrize(("value", "printed"), [(7.4, "7.4"), (8.0, "8.0"), (7.2992700729927, "7.2")])
def test_a_changed_published_claim_is_a_mismatch(bundle, value, printed):
    path = bundle / TP / "claims.json"
    payload = json.loads(path.read_text())
    target = next(c for c in payload["claims"] if c["name"] == "throughput.english.c1.decode_tokens_per_s")
    target["value"], target["printed"] = value, printed
    path.write_text(json.dumps(payload))
    reseal(bundle)
    assert mismatched(verify(bundle)) == {"throughput.english.c1.decode_tokens_per_s"}


def test_a_removed_or_added_published_claim_is_a_mismatch(bundle):
    path = bundle / TP / "claims.json"
    payload = json.loads(path.read_text())
    payload["claims"] = [c for c in payload["claims"] if c["name"] != "throughput.english.c1.ttft_median_s"]
    payload["claims"].append(
        {
            "name": "throughput.english.c1.best_ever",
            "value": 99.0,
            "unit": "tokens/s",
            "printed": "99.0",
            "formula": "made up",
        }
    )
    path.write_text(json.dumps(payload))
    reseal(bundle)
    assert mismatched(verify(bundle)) == {"throughput.english.c1.ttft_median_s", "throughput.english.c1.best_ever"}


def test_a_deleted_file_is_caught(bundle):
    (bundle / TP / "requests.jsonl.zst").unlink()
    result = verify(bundle)
    assert any(p.kind == "MISSING" and p.path == f"{TP}/requests.jsonl.zst" for p in result.problems)
    assert "throughput.english.c1.decode_tokens_per_s" in mismatched(result)
    assert not result.ok


def test_a_deleted_file_is_caught_even_with_resealed_checksums(bundle):
    (bundle / CAP / "chunks.jsonl.zst").unlink()
    reseal(bundle)
    result = verify(bundle)
    assert "capacity.window_aggregate_tokens_per_s" in mismatched(result)


def test_a_deleted_claims_file_is_caught(bundle):
    (bundle / TP / "claims.json").unlink()
    reseal(bundle)
    result = verify(bundle)
    assert any(p.kind == "MISSING" and p.path == f"{TP}/claims.json" for p in result.problems)
    assert not result.ok


def test_an_edit_without_updating_the_checksums_is_caught(bundle):
    report = bundle / TP / "report.md"
    report.write_text(report.read_text().replace("7.3", "9.9"))  # the rendering only; the claims still agree
    result = verify(bundle)
    assert [(p.kind, p.path) for p in result.problems] == [("CHANGED", f"{TP}/report.md")]
    assert not mismatched(result)
    assert not result.ok
    assert result.summary().startswith("FAILED")


def test_an_extra_file_is_caught(bundle):
    (bundle / TP / "extra.jsonl").write_text("{}\n")
    result = verify(bundle)
    assert [(p.kind, p.path) for p in result.problems] == [("UNLISTED", f"{TP}/extra.jsonl")]


def test_a_missing_checksum_list_is_caught(bundle):
    (bundle / "SHA256SUMS").unlink()
    result = verify(bundle)
    assert [(p.kind, p.path) for p in result.problems] == [("MISSING", "SHA256SUMS")]


def test_a_checksum_line_pointing_outside_is_caught(bundle):
    with open(bundle / "SHA256SUMS", "a") as handle:
        handle.write("0" * 64 + "  ../../etc/passwd\n")
    assert any(p.kind == "BAD_LINE" for p in verify(bundle).problems)


def test_data_that_breaks_a_claim_function_is_reported_not_raised(bundle):
    manifest_path = bundle / CAP / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["plan"]["sessions"]
    manifest_path.write_text(json.dumps(manifest))
    reseal(bundle)
    result = verify(bundle)
    assert any("claims cannot be recomputed" in p.detail for p in result.problems)
    assert not result.ok


def rewrite_claims(bundle, change):
    path = bundle / TP / "claims.json"
    payload = json.loads(path.read_text())
    for claim in payload["claims"]:
        change(claim)
    path.write_text(json.dumps(payload))
    reseal(bundle)


def test_published_claims_state_their_kind_and_direction(bundle):
    claims = {c["name"]: c for c in json.loads((bundle / TP / "claims.json").read_text())["claims"]}
    decode = claims["throughput.english.c1.decode_tokens_per_s"]
    assert (decode["kind"], decode["direction"]) == ("figure", "higher")
    assert (
        claims["throughput.english.c1.failed_requests"]["kind"],
        claims["throughput.english.c1.failed_requests"]["direction"],
    ) == ("count", "lower")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("direction", "lower", "direction 'lower', recomputed 'higher'"),
        ("kind", "count", "kind 'count', recomputed 'figure'"),
    ],
)
def test_a_changed_kind_or_direction_is_a_mismatch(bundle, field, value, reason):
    def change(claim):
        if claim["name"] == "throughput.english.c1.decode_tokens_per_s":
            claim[field] = value

    rewrite_claims(bundle, change)
    result = verify(bundle)
    assert mismatched(result) == {"throughput.english.c1.decode_tokens_per_s"}
    assert any(reason in c.reason for c in result.checks if not c.ok)


def test_claims_published_before_claims_had_kind_and_direction_still_verify(bundle):
    rewrite_claims(bundle, lambda claim: (claim.pop("kind"), claim.pop("direction")))
    result = verify(bundle)
    assert result.ok, [line for line in result.lines() if not line.startswith("ok")]


def test_a_plan_of_a_newer_version_is_one_clear_problem(bundle):
    manifest_path = bundle / CAP / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["plan_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    reseal(bundle)
    result = verify(bundle)
    problem = next(p for p in result.problems if p.path == CAP)
    assert "the capacity plan is version 99, newer than this loadproof reads (up to 1)" in problem.detail


def test_not_a_bundle_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no bundle directory"):
        verify(tmp_path / "nothing")
    with pytest.raises(UsageError, match="not a loadproof bundle"):
        verify(tmp_path)


def test_verify_imports_only_claim_definitions_and_store():
    """The checker's own modules reach no client, engine, scenario, report or model code, only the claim
    definitions, the store and the run directory's types, bundle.json's among them (what those modules
    import in turn: test_isolation.py)."""
    import ast
    from pathlib import Path

    import loadproof.verify
    from tests.python_source import parse

    allowed = ("loadproof.errors", "loadproof.metrics", "loadproof.rundir", "loadproof.store", "loadproof.verify")
    for module in Path(loadproof.verify.__file__).parent.glob("*.py"):
        for node in ast.walk(parse(module.read_text(), str(module))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("loadproof"):
                assert node.module.startswith(allowed), f"{module.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("loadproof") and not a.name.startswith(allowed) for a in node.names)
