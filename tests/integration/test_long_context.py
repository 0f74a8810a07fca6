"""Capacity, prefill and interference on the real embedded engine, passing and failing for real reasons.

The failure cases are produced by configuring the real engine (a second instance with max_num_seqs 2
and a KV budget of a few thousand tokens) or the workload (a negative-control probe), never by faking
its answers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import start_serve, stop_serve
from tests.polling import wait_until

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]


def loadproof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loadproof", *args], capture_output=True, text=True, timeout=800)


def run(kind: str, engine, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict, Path]:
    result = loadproof(
        "run",
        kind,
        "--url",
        engine.url,
        "--endpoint",
        "completions",
        "--tokenizer",
        str(engine.tokenizer),
        "--out",
        str(tmp_path),
        *args,
    )
    dirs = [d for d in tmp_path.iterdir() if d.name.startswith(kind)]
    assert len(dirs) == 1, result.stderr
    claims = {c["name"]: c for c in json.loads((dirs[0] / "claims.json").read_text())["claims"]}
    return result, claims, dirs[0]


def criteria(claims: dict, prefix: str) -> dict[str, str]:
    return {k.split(".criteria.")[1]: v["value"] for k, v in claims.items() if k.startswith(f"{prefix}.criteria.")}


def test_capacity_passes_with_every_criterion_evidenced(engine, tmp_path):
    result, claims, run_dir = run(
        "capacity",
        engine,
        tmp_path,
        "--sessions",
        "4",
        "--input-tokens",
        "1024",
        "--window-s",
        "4",
        "--num-probes",
        "2",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert claims["capacity.verdict"]["value"] == "PASS"
    assert set(criteria(claims, "capacity")) == {
        "engine_idle_before",
        "all_streams_started",
        "prompt_tokens",
        "running",
        "waiting",
        "preemptions",
        "streams_progress",
        "cold_prefix_cache",
        "probes",
        "drain",
    }
    assert set(criteria(claims, "capacity").values()) == {"PASS"}
    assert "engine idle: 0 running, 0 waiting" in result.stderr
    assert claims["capacity.probes_retrieved"]["value"] == 4
    assert claims["capacity.prefix_cache_hits"]["value"] == 0
    assert claims["capacity.window_per_stream_min_tokens_per_s"]["value"] > 1
    assert (
        claims["capacity.window_aggregate_tokens_per_s"]["value"]
        >= 4 * claims["capacity.window_per_stream_min_tokens_per_s"]["value"] - 1e-9
    )
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert [r["prompt_tokens"] for r in rows] == [1024] * 4
    first = result.stdout.splitlines()[0]
    assert first == "capacity PASS: 10 of 10 acceptance criteria held", result.stdout  # the headline, its verdict first
    assert "slowest stream" in result.stdout and len(result.stdout.splitlines()) <= 12, result.stdout
    shown = loadproof("-v", "report", str(run_dir))  # every table with -v: the window's streams, the drain
    assert "longest silence" in shown.stdout and "running 0, waiting 0" in shown.stdout, shown.stdout
    assert (run_dir / "metrics.jsonl").stat().st_size > 0


def test_a_fact_never_planted_fails_retrieval(engine, tmp_path):
    result, claims, _ = run(
        "capacity",
        engine,
        tmp_path,
        "--sessions",
        "2",
        "--input-tokens",
        "800",
        "--window-s",
        "2",
        "--negative-control",
    )
    assert result.returncode == 1
    assert criteria(claims, "capacity")["probes"] == "FAIL"
    assert claims["capacity.criteria.probes"]["formula"].startswith("0/2 planted facts retrieved")
    others = {k: v for k, v in criteria(claims, "capacity").items() if k != "probes"}
    assert set(others.values()) == {"PASS"}  # it fails for that reason alone


def test_prefill_is_cold_and_exact(engine, tmp_path):
    result, claims, _ = run(
        "prefill", engine, tmp_path, "--input-tokens", "2048", "--repeats", "2", "--decode-tokens", "16"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert claims["prefill.verdict"]["value"] == "PASS"
    assert claims["prefill.prefix_cache_hits"]["value"] == 0
    ttfts = [claims[f"prefill.r{i}.ttft_s"]["value"] for i in range(2)]
    assert claims["prefill.cold_ttft_median_s"]["value"] == pytest.approx(sum(ttfts) / 2)


def test_interference_measures_before_during_after_and_warm_followups(engine, tmp_path):
    result, claims, _ = run(
        "interference",
        engine,
        tmp_path,
        "--sessions",
        "2",
        "--session-tokens",
        "1024",
        "--newcomer-tokens",
        "4096",
        "--window-s",
        "2",
    )
    for name in ("before", "during", "after"):
        assert claims[f"interference.{name}_tokens_per_s"]["value"] >= 0
    assert claims["interference.newcomer_ttft_s"]["value"] > 0
    assert criteria(claims, "interference")["followup_warm"] == "PASS"
    assert claims["interference.followup_prefix_cache_hits"]["value"] > 0
    assert result.returncode in (0, 1)
    assert (result.returncode == 0) == (claims["interference.verdict"]["value"] == "PASS")


@pytest.fixture(scope="module")
def constrained_engine(tmp_path_factory):
    """A second real engine: at most 3 running sequences and room for about 8,400 tokens of KV cache
    (200 blocks; vLLM reports 5,979 tokens, counting Gemma 3's sliding-window layers conservatively)."""
    profile = tmp_path_factory.mktemp("profile") / "small.toml"
    profile.write_text(
        'name = "small"\nengine = "embedded"\n'
        '[model]\npath = "embedded:gemma3-270m"\nserved_name = "gemma-3-270m"\ndtype = "bfloat16"\nmax_model_len = 4096\n'
        '[serving]\nendpoint = "completions"\nenforce_eager = true\n'
        'extra_args = ["--max-num-seqs", "3", "--num-gpu-blocks-override", "200"]\n'
        'env = { VLLM_CPU_KVCACHE_SPACE = "1", VLLM_CPU_OMP_THREADS_BIND = "0-1", VLLM_CPU_NUM_OF_RESERVED_CPU = "0" }\n'
    )
    handle = start_serve([str(profile)], tmp_path_factory.mktemp("small-engine") / "serve.stderr")
    yield handle.engine
    stop_serve(handle)


def test_more_sessions_than_max_num_seqs_fail_on_waiting(constrained_engine, tmp_path):
    result, claims, _ = run(
        "capacity", constrained_engine, tmp_path, "--sessions", "4", "--input-tokens", "500", "--window-s", "2"
    )
    assert result.returncode == 1
    c = criteria(claims, "capacity")
    assert c["all_streams_started"] == "FAIL" and c["waiting"] == "FAIL"
    evidence = claims["capacity.criteria.all_streams_started"]["formula"]
    assert "3/4 sessions produced a first token" in evidence
    assert re.search(r"kept [1-9]\d* waiting for \d+ s while all 3 running were decoding", evidence), evidence
    assert c["prompt_tokens"] == "FAIL"  # the session never admitted has no usage to show
    assert c["drain"] == "PASS"


def test_kv_budget_too_small_fails_on_waiting_with_the_cache_full(constrained_engine, tmp_path):
    # 3 sessions fit max_num_seqs, but 3 x 3,000 tokens exceed the KV cache
    result, claims, _ = run(
        "capacity", constrained_engine, tmp_path, "--sessions", "3", "--input-tokens", "3000", "--window-s", "2"
    )
    assert result.returncode == 1
    c = criteria(claims, "capacity")
    assert c["waiting"] == "FAIL" or c["preemptions"] == "FAIL"
    evidence = claims["capacity.criteria.all_streams_started"]["formula"]
    # blocked by memory, not by the sequence limit: fewer than max_num_seqs (3) were running (2 where the 200
    # blocks hold 6,000 tokens or more; 1 on a CPU without AVX-512, where they hold 5,979)
    assert re.search(r"while all [12] running were decoding \(KV cache", evidence), evidence


def test_search_finds_max_num_seqs(constrained_engine, tmp_path):
    # The search is about admission (running, waiting), so the criteria that do not depend on it are
    # set aside: whether a 270M model retrieves a fact from a randomly salted 300-token haystack (tested
    # on its own above; a salt it misreads would fail a trial at any size) and a stream's longest
    # silence, which a machine under load stretches.
    # No CPU hogs beside it (there were two until 2026-12-01): with both cores taken by busy loops the
    # engine's OpenMP threads stall: it prefilled 30 tokens/s, a session reached the scheduler up to 25 s
    # after it was sent, and one request more than the trial's sessions arrived with them and sat
    # waiting through the window (running 3, waiting 1 with 3 sessions; 3 and 2 with 4), most likely
    # one the client had cancelled in the trial before, handed over late by the starved front end. The
    # engine really had that request waiting, so the trial rightly failed; the search can only find
    # max_num_seqs on an engine nobody else is using.
    result = loadproof(
        "run",
        "capacity",
        "--url",
        constrained_engine.url,
        "--endpoint",
        "completions",
        "--tokenizer",
        str(constrained_engine.tokenizer),
        "--out",
        str(tmp_path),
        "--input-tokens",
        "300",
        "--window-s",
        "2",
        "--skip-probe-check",
        "--max-gap-s",
        "60",
        "--search",
        "sessions",
        "--sessions",
        "1",
        "--search-max",
        "4",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (folder,) = tmp_path.iterdir()
    summary = json.loads((folder / "search.json").read_text())
    failed = {}
    for trial_dir in folder.glob("capacity-*"):
        trial = {c["name"]: c for c in json.loads((trial_dir / "claims.json").read_text())["claims"]}
        failed[trial_dir.name] = {
            k: v["formula"] for k, v in trial.items() if ".criteria." in k and v["value"] == "FAIL"
        }
    assert summary["largest_pass"] == 3 and summary["smallest_fail"] == 4, (failed, result.stdout)
    assert [t["value"] for t in summary["trials"]] == [1, 2, 4, 3]
    assert len(list(folder.glob("capacity-*/claims.json"))) == 4
    assert len((folder / "search.jsonl").read_text().splitlines()) == 4
    assert "largest passing sessions: 3, 4 fails" in result.stdout


def test_a_run_on_a_busy_engine_fails_before_sending_anything(constrained_engine, tmp_path):
    """Someone else's stream holds a slot: the run waits for the engine to be idle, then gives up."""
    import http.client
    import threading

    host, port = constrained_engine.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    body = json.dumps(
        {
            "model": constrained_engine.model,
            "prompt": "Count on and on:",
            "max_tokens": 3000,
            "ignore_eos": True,
            "stream": True,
        }
    )
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    stop = threading.Event()

    def drain() -> None:
        try:
            while not stop.is_set() and response.read1(4096):
                pass
        except (OSError, AttributeError, ValueError):
            pass  # the test closed the connection under it

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        result = loadproof(
            "run",
            "capacity",
            "--url",
            constrained_engine.url,
            "--endpoint",
            "completions",
            "--tokenizer",
            str(constrained_engine.tokenizer),
            "--out",
            str(tmp_path),
            "--sessions",
            "1",
            "--input-tokens",
            "300",
            "--window-s",
            "1",
            "--idle-timeout-s",
            "3",
        )
    finally:
        stop.set()
        conn.close()  # the engine aborts it; the next test starts on an idle engine
        reader.join(timeout=10)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "engine busy: 1 running, 0 waiting before the run" in result.stderr
    assert "waiting for the engine to be idle: 1 running, 0 waiting" in result.stderr
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "requests.jsonl").read_text() == ""  # nothing was sent
    wait_until(
        lambda: constrained_engine.metric("vllm:num_requests_running") == 0, 60, "the engine idle again", every_s=0.2
    )


def test_a_run_the_engine_refuses_outright_says_so_first_in_its_words_and_exits_4(constrained_engine, tmp_path):
    """Issue #37: `--tools ... --tool-choice required` against an engine served without a tool-call parser (as
    `loadproof serve --embedded` serves it, and as this second engine is; the session's has one) is refused
    with HTTP 400 on every request. The run measured nothing: its first line says so with the engine's own
    text and count, report.md and report.html open with it, and the exit code is 4, not 0."""
    examples = Path(__file__).resolve().parents[2] / "docs" / "examples"
    result = loadproof(
        "run", "load", "--url", constrained_engine.url, "--endpoint", "chat",
        "--tokenizer", str(constrained_engine.tokenizer), "--out", str(tmp_path),
        "--rate", "1", "-n", "3", "--input-tokens", "96", "--output-tokens", "16", "--no-ignore-eos",
        "--tools", str(examples / "tools-weather.json"), "--tool-choice", "required",
    )  # fmt: skip
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    first = result.stdout.splitlines()[0]
    assert first.startswith("The run measured nothing: 3 of 3 requests failed; most frequent (3x): HTTP 400: "), first
    assert "tool-call-parser" in first, first  # the engine's own reason, not a count
    (run_dir,) = tmp_path.glob("load-*")
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert [r["http_status"] for r in records] == [400, 400, 400]
    assert first.removeprefix("The run measured nothing: ") in result.stderr.strip().splitlines()[-1]
    report = (run_dir / "report.md").read_text().splitlines()
    assert report[2] == "## Measured nothing" and report[4] == first.replace("`", "'"), report[:6]  # no code span
    assert "tool-call-parser" in (run_dir / "report.html").read_text()
