"""`loadproof import` on files the tools wrote themselves (tests/fixtures/ingest/, recorded by
scripts/record-peer-results.py against the simulator and the embedded engine): each becomes a load run marked by its
source, whose claims are recomputed from the file's requests and agree with what the tool itself stated; a file
without per-request data carries the stated figures only; damaged files and other tools' or versions' files are one
line and exit code 2, with nothing written."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from loadproof.cli import main
from loadproof.errors import UsageError
from loadproof.ingest.importing import import_results
from loadproof.metrics import compute_claims
from loadproof.store.run_dir import load_run

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"
VLLM = FIXTURES / "vllm-bench" / "sim-rate-4" / "result.json"
GUIDELLM = FIXTURES / "guidellm" / "sim-rate-4" / "benchmarks.json"
LOADPROOF_LOAD_RUN = FIXTURES.parents[2] / "docs/runs/h200-2026-12-02-lora/1-base/runs/load-20261202-182539-c66a"
AIPERF = FIXTURES / "aiperf" / "sim-concurrency-4"
INFERENCE_PERF = FIXTURES / "inference-perf" / "sim-rate-5"


def claims_of(run_dir: Path) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads((run_dir / "claims.json").read_text())["claims"]}


def one(path: Path, out: Path, **kw: str):
    done = import_results(path, out, **kw)
    assert len(done) == 1
    return done[0]


def test_vllm_bench_serve_detailed_result_recomputes_what_vllm_stated(tmp_path):
    done = one(VLLM, tmp_path)
    data = json.loads(VLLM.read_text())
    source = done.report.run.manifest.source
    assert (source.tool, source.per_request) == ("vllm-bench", True)
    assert source.sha256 == hashlib.sha256(VLLM.read_bytes()).hexdigest()
    claims = claims_of(done.path)
    assert claims["load.requests"]["value"] == data["completed"] + data["failed"]
    # the same requests and vLLM's own definitions (linear percentiles, ITL per gap): the same figures
    for ours, theirs in (("load.ttft_s.p50", "median_ttft_ms"), ("load.itl_s.p99", "p99_itl_ms")):
        assert claims[ours]["value"] == pytest.approx(data[theirs] / 1000, rel=1e-6), ours
    median = claims["load.ttft_s.p50"]  # with its interval, as a run of loadproof's own has it
    assert median["interval"]["low"] <= median["value"] <= median["interval"]["high"]
    assert claims["load.tpot_s.mean"]["value"] == pytest.approx(data["mean_tpot_ms"] / 1000, rel=1e-6)


def test_guidellm_keeps_no_chunk_times_so_its_run_claims_no_itl(tmp_path):
    done = one(GUIDELLM, tmp_path)
    bench = json.loads(GUIDELLM.read_text())["benchmarks"][0]
    assert done.report.run.manifest.source.version == json.loads(GUIDELLM.read_text())["metadata"]["guidellm_version"]
    claims = claims_of(done.path)
    assert claims["load.requests"]["value"] == bench["metrics"]["request_totals"]["total"]
    ttft = bench["metrics"]["time_to_first_token_ms"]["successful"]["mean"] / 1000
    assert claims["load.ttft_s.mean"]["value"] == pytest.approx(ttft, rel=1e-4)
    tpot = bench["metrics"]["inter_token_latency_ms"]["successful"]["mean"] / 1000  # GuideLLM's ITL is our TPOT
    assert claims["load.tpot_s.mean"]["value"] == pytest.approx(tpot, rel=1e-4)
    assert not any(name.startswith("load.itl_s.") for name in claims)


def test_aiperf_export_with_its_records(tmp_path):
    done = one(AIPERF, tmp_path)
    data = json.loads((AIPERF / "profile_export_aiperf.json").read_text())
    assert done.report.run.manifest.source.version == data["aiperf_version"]
    assert done.report.run.manifest.source.file == "profile_export_aiperf.json"
    claims = claims_of(done.path)
    assert claims["load.requests"]["value"] == data["request_count"]["avg"]
    assert claims["load.ttft_s.p50"]["value"] == pytest.approx(data["time_to_first_token"]["p50"] / 1000, rel=1e-6)
    itl = data["inter_chunk_latency"]["avg"] / 1000  # AIPerf's inter-chunk latency is our ITL
    assert claims["load.itl_s.mean"]["value"] == pytest.approx(itl, rel=1e-6)
    assert done.report.run.manifest.plan["max_concurrency"] == data["input_config"]["phases"][0]["concurrency"]


def test_inference_perf_folder_one_run_a_stage_with_its_config(tmp_path):
    done = one(INFERENCE_PERF, tmp_path, profile="sim-small")
    stage = json.loads((INFERENCE_PERF / "stage_0_lifecycle_metrics.json").read_text())
    manifest = done.report.run.manifest
    assert manifest.source.file == "stage_0_lifecycle_metrics.json"
    assert manifest.plan["rate_rps"] == stage["load_summary"]["requested_rate"]
    assert manifest.plan["arrival"] == "poisson" and manifest.profile["name"] == "sim-small"
    claims = claims_of(done.path)
    assert claims["load.requests"]["value"] == stage["load_summary"]["count"]
    ttft = stage["successes"]["latency"]["time_to_first_token"]["median"]
    assert claims["load.ttft_s.p50"]["value"] == pytest.approx(ttft, rel=1e-6)


@pytest.mark.parametrize(
    ("path", "tool"),
    [
        (FIXTURES / "vllm-bench" / "embedded-rate-2" / "result.json", "vllm-bench"),
        (FIXTURES / "guidellm" / "embedded-rate-2" / "benchmarks.json", "guidellm"),
        (FIXTURES / "inference-perf" / "sim-rate-15" / "per_request_lifecycle_metrics.json", "inference-perf"),
    ],
)
def test_every_recorded_file_imports_with_the_requests_its_tool_counted(tmp_path, path, tool):
    done = one(path, tmp_path, tool=tool)
    stated = {f.figure: f.value for f in done.report.run.manifest.source.stated if not f.stat}
    assert len(done.report.run.records) == stated["requests"] > 0
    assert claims_of(done.path)["load.failed_requests"]["value"] == stated["failed_requests"]


def test_a_file_without_per_request_data_carries_what_it_states_and_nothing_more(tmp_path):
    data = json.loads(VLLM.read_text())
    for key in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
        data.pop(key)  # what vllm bench serve writes without --save-detailed (its own list, benchmarks/serve.py)
    plain = tmp_path / "result.json"
    plain.write_text(json.dumps(data))
    done = one(plain, tmp_path / "runs")
    run = load_run(done.path)
    assert run.records == [] and run.manifest.source.per_request is False
    claims = {c.name: c for c in compute_claims(run)}
    assert claims["load.ttft_s.p99"].value == pytest.approx(data["p99_ttft_ms"] / 1000)
    assert claims["load.request_throughput_rps"].value == data["request_throughput"]
    assert claims["load.requests"].value == data["completed"] + data["failed"]
    assert all(c.interval is None for c in claims.values()), "no interval is invented for a stated figure"
    assert all("stated by vllm-bench" in c.formula for c in claims.values())


def test_an_imported_run_compares_with_a_load_run_of_loadproof(tmp_path):
    from loadproof.report.compare import build_side, compare

    measured = load_run(LOADPROOF_LOAD_RUN)  # a published load run loadproof measured (docs/runs)
    imported = load_run(one(VLLM, tmp_path).path)
    with pytest.raises(UsageError, match="not compared, the runs differ: .*rate 16 vs 4"):
        compare(build_side("C", [imported], compute_claims), [build_side("B", [measured], compute_claims)])
    comparison = compare(
        build_side("C", [imported], compute_claims), [build_side("B", [measured], compute_claims)], anyway=True
    )
    change = comparison.baselines[0].changes["load.ttft_s.p50"]
    assert change.distinguishable is not None, "both sides carry the TTFT median's interval"


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    old = sys.argv
    sys.argv = ["loadproof", *argv]
    try:
        with pytest.raises(SystemExit) as ended:
            main()
    finally:
        sys.argv = old
    return int(ended.value.code or 0), capsys.readouterr().err


def _bad_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    raw = VLLM.read_bytes()
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(raw[: len(raw) // 2])
    newer = json.loads(GUIDELLM.read_text())
    newer["metadata"]["guidellm_version"] = "0.9.0"
    newer_file = tmp_path / "guidellm-newer.json"
    newer_file.write_text(json.dumps(newer))
    older = json.loads(VLLM.read_text())
    del older["max_concurrent_requests"], older["max_output_tokens_per_s"]  # keys vLLM added after its older releases
    older_file = tmp_path / "vllm-older.json"
    older_file.write_text(json.dumps(older))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": "world"}))
    cut = tmp_path / "aiperf-cut"
    shutil.copytree(AIPERF, cut)
    lines = (cut / "profile_export.jsonl").read_bytes()
    (cut / "profile_export.jsonl").write_bytes(lines[: len(lines) - 40])
    return {
        "truncated": (truncated, "not complete JSON"),
        "newer GuideLLM": (newer_file, "another version's shape"),
        "older vllm": (older_file, "another version's shape"),
        "another tool's": (other, "not a result file of"),
        "truncated records": (cut, "line 40 is not complete JSON"),
    }


def test_bad_files_are_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "runs"
    for what, (path, needle) in _bad_files(tmp_path).items():
        code, err = _cli(["import", str(path), "-o", str(out)], capsys)
        assert code == 2, (what, err)
        assert needle in err and len(err.strip().splitlines()) == 1, (what, err)
    code, err = _cli(["import", str(VLLM), "--tool", "aiperf", "-o", str(out)], capsys)
    assert code == 2 and "a vllm bench serve file, not AIPerf's" in err
    code, err = _cli(["import", str(VLLM), "--tool", "jmeter", "-o", str(out)], capsys)
    assert code == 2 and "--tool 'jmeter'" in err
    assert not out.exists() or not any(out.iterdir())
