"""`loadproof run load --search rate` and `--sweep` against the simulator (a real process).

The simulated engine's step costs a fixed time T whatever it holds (no prefill or per-sequence cost), a
request takes its first token from the step that prefills it and one more per step, so it holds one of
`max_num_seqs` S slots for exactly O steps (O output tokens): the engine completes at most
mu = S / (O T) requests per second (modeled seconds; x time_scale on the wall clock). Below mu, constant
arrivals never queue for long; above it the queue grows by (rate - mu) per second, so a request arriving
at t waits about (rate - mu) t / mu, and a run of D seconds keeps 99% of its requests within a TTFT SLO
tau only while rate <= mu (1 + tau / (0.99 D)). The search must land between those two bounds (give or
take its resolution and 5% for wall-clock overheads), and the engine's own /metrics must show the batch
full at the highest passing rate and a queue above it. That test decides on the point value (`--search-decision
point`), whose bounds these are; the search on intervals (the default, #41) is tested after it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.metrics.load_series import recompute_search
from loadproof.sim.text import tokenizer_path
from tests.integration.bundles import publish_and_verify, verify_bundle
from tests.integration.sim_process import SimProcess

pytestmark = pytest.mark.timeout(180)

FLAT_STEP = {
    "prefill_s_per_token": 0.0,
    "prefill_s_per_token_ctx": 0.0,
    "decode_s_per_seq": 0.0,
    "decode_s_per_ctx_token": 0.0,
    "request_overhead_s": 0.0,
}


def load(sim: SimProcess, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "loadproof",
        "run",
        "load",
        "--url",
        sim.url,
        "--tokenizer",
        str(tokenizer_path()),
        "--endpoint",
        "completions",
        "--out",
        str(out),
        "--input-tokens",
        "64",
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=150)


@pytest.mark.parametrize(
    "seqs,step_s,output,slo_s,duration_s",
    [
        (4, 0.02, 10, 0.25, 3.0),  # mu = 4 / (10 x 0.02) = 20 requests/s
        (2, 0.04, 8, 0.2, 3.0),  # mu = 2 / (8 x 0.04) = 6.25 requests/s
    ],
)
def test_the_rate_search_finds_where_the_simulated_engine_saturates(
    tmp_path: Path, seqs, step_s, output, slo_s, duration_s
):
    config = {"max_num_seqs": seqs, "cost": {"step_overhead_s": step_s, **FLAT_STEP}}
    mu = seqs / (output * step_s)
    highest = mu * (1 + slo_s / (0.99 * duration_s))  # where a run of D seconds starts missing 1% of the SLO
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        proc = load(
            sim,
            tmp_path,
            "--search",
            "rate",
            "--rate",
            f"{0.8 * mu:.3g}",
            "--arrival",
            "constant",
            "--duration-s",
            str(duration_s),
            "--output-tokens",
            str(output),
            "--slo",
            f"ttft={slo_s}s",
            "--search-resolution",
            "10%",
            "--search-decision",
            "point",
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resolution 10%" in proc.stdout + proc.stderr
    (folder,) = tmp_path.glob("load-search-*")
    summary = json.loads((folder / "search.json").read_text())
    low, high = summary["max_rate_rps"], summary["min_failing_rate_rps"]
    assert low is not None and high is not None, summary["trials"]
    assert high - low <= 0.1 * low + 1e-9  # the stated resolution
    assert mu * 0.95 <= high and low <= highest * 1.05, (mu, highest, low, high)
    trials = {t["rate_rps"]: t for t in summary["trials"]}
    assert len(trials) == len(summary["trials"])  # no rate tried twice
    assert len(list(folder.glob("load-*/claims.json"))) == len(trials)  # every trial kept as its own run
    assert len((folder / "search.jsonl").read_text().splitlines()) == len(trials)
    # verified on the engine's own /metrics: the batch never exceeded max_num_seqs and was full at the
    # highest passing rate; at the lowest failing rate requests queued
    assert all(t["engine_running_max"] <= seqs for t in trials.values())
    assert trials[low]["engine_running_max"] == seqs
    assert trials[high]["engine_waiting_max"] > 0 or trials[high]["client_limited"]
    # the claim, in claims.json, recomputed from the trial directories alone
    claims = {c["name"]: c for c in json.loads((folder / "claims.json").read_text())["claims"]}
    assert claims["load.search.max_rate_rps"]["value"] == low
    _, recomputed, again = recompute_search(folder)
    assert {c.name: c.value for c in again} == {name: c["value"] for name, c in claims.items()}
    assert [t.passed for t in recomputed] == [t["passed"] for t in summary["trials"]]
    assert "Rate search" in proc.stdout and (folder / "report.html").is_file()
    # the console: one line a trial as it ends, the result and a table that fit a screen (issue #38: at most 40)
    said = (proc.stdout + proc.stderr).splitlines()
    assert len(said) <= min(40, 10 + 3 * len(trials)), "\n".join(said)  # 2 a trial, a table row, 10 more
    assert sum(line.startswith(("  PASS: ", "  FAIL: ")) for line in said) == len(trials)
    assert proc.stdout.splitlines()[0].startswith("highest rate meeting the SLO: "), proc.stdout
    # `loadproof report FOLDER` recomputes it, and refuses a claims.json that says otherwise
    again = subprocess.run(
        [sys.executable, "-m", "loadproof", "report", str(folder)], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "every claim as stored" in again.stdout, again.stderr[-2000:]
    check_published_search(folder, tmp_path / "bundle", low, high)
    stored = json.loads((folder / "claims.json").read_text())
    for claim in stored["claims"]:
        if claim["name"] == "load.search.max_rate_rps":
            claim["printed"] = f"{high:.4f}"
    (folder / "claims.json").write_text(json.dumps(stored))
    tampered = subprocess.run(
        [sys.executable, "-m", "loadproof", "report", str(folder)], capture_output=True, text=True, timeout=120
    )
    assert tampered.returncode == 2 and "load.search.max_rate_rps stored" in tampered.stderr, tampered.stderr[-2000:]


def check_published_search(folder: Path, bundle: Path, low: float, high: float) -> None:
    """`publish SEARCH_FOLDER`: every trial a run of the bundle, the search's claims in series/, and `verify`
    recomputes load.search.max_rate_rps from the trials; a bundle that lies about it (its checksums
    rewritten to match) or lacks a trial fails."""
    verified = publish_and_verify(folder, bundle)
    meta = json.loads((bundle / "bundle.json").read_text())
    (series,) = meta["series"]
    assert series["kind"] == "search" and len(series["runs"]) == len(meta["runs"])
    assert series["runs"] == [r["path"] for r in meta["runs"]]
    assert f"run search:{series['series_id']}" in verified.stdout and "load.search.max_rate_rps" in verified.stdout
    from loadproof.verify.checksums import write_sums

    lying = bundle.with_name("lying")
    shutil.copytree(bundle, lying)
    claims_path = lying / series["path"] / "claims.json"
    stored = json.loads(claims_path.read_text())
    for claim in stored["claims"]:
        if claim["name"] == "load.search.max_rate_rps":
            claim["value"], claim["printed"] = high, f"{high:.4f}"
    claims_path.write_text(json.dumps(stored))
    (lying / "SHA256SUMS").unlink()
    write_sums(lying)
    failed = verify_bundle(lying)
    assert failed.returncode == 1 and "FAILED" in failed.stdout, failed.stdout[-2000:]
    assert [line.split()[1] for line in failed.stdout.splitlines() if line.startswith("MISMATCH")] == [
        "load.search.max_rate_rps"
    ], failed.stdout[-2000:]
    missing = bundle.with_name("missing")
    shutil.copytree(bundle, missing)
    shutil.rmtree(missing / series["runs"][0])
    meta["runs"] = meta["runs"][1:]
    (missing / "bundle.json").write_text(json.dumps(meta))
    (missing / "SHA256SUMS").unlink()
    write_sums(missing)
    gone = verify_bundle(missing)
    assert gone.returncode == 1 and "series" in gone.stdout and "lists a run the bundle does not" in gone.stdout, (
        gone.stdout[-2000:]
    )


def test_a_sweep_keeps_one_run_per_point_and_draws_its_curves(tmp_path: Path):
    config = {"max_num_seqs": 4, "cost": {"step_overhead_s": 0.02, **FLAT_STEP}}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        proc = load(
            sim,
            tmp_path,
            "--sweep",
            "auto",
            "--sweep-points",
            "2",
            "-n",
            "30",
            "--output-tokens",
            "6",
            "--slo",
            "ttft=1s",
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (folder,) = tmp_path.glob("load-sweep-*")
    summary = json.loads((folder / "sweep.json").read_text())
    points = summary["points"]
    assert [p["kind"] for p in points] == ["synchronous", "throughput", "rate", "rate"] and summary["completed"]
    sync, thr = points[0], points[1]
    assert sync["engine_running_max"] == 1  # one at a time, on the engine's own /metrics
    assert thr["engine_running_max"] is None or thr["engine_running_max"] <= 4  # never above max_num_seqs
    assert thr["request_throughput_rps"] > sync["request_throughput_rps"]
    # the last point asks the throughput run's measured rate, the one before halfway from the synchronous one
    assert points[3]["rate_rps"] == pytest.approx(thr["request_throughput_rps"], rel=1e-3)
    assert points[2]["rate_rps"] == pytest.approx(
        (sync["request_throughput_rps"] + thr["request_throughput_rps"]) / 2, rel=1e-3
    )
    runs = sorted(p.name for p in folder.glob("load-*") if p.is_dir())
    assert runs == sorted(p["run_dir"] for p in points)
    html = (folder / "report.html").read_text()
    keys = re.findall(r'data-plot="([^"]+)"', html)  # the curves against the rate, SLO attainment last
    assert keys == ["latency", "e2el", "goodput", "attainment"] and html.count("<svg") == 4
    assert "Goodput vs rate" in html and "TTFT p99" in html
    assert all(f'<a href="{p["run_dir"]}/report.html">' in html for p in points)  # each point's own report


def test_a_load_run_waits_for_an_idle_engine_unless_told_not_to(tmp_path: Path):
    import threading
    import urllib.request

    config = {"max_num_seqs": 4, "cost": {"step_overhead_s": 0.02, **FLAT_STEP}}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        body = json.dumps(
            {"model": "sim", "prompt": "hold the engine", "max_tokens": 600, "ignore_eos": True, "stream": True}
        ).encode()
        request = urllib.request.Request(
            sim.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        holder = urllib.request.urlopen(request, timeout=60)  # someone else's stream: 12 s of decoding

        def drain() -> None:
            try:
                holder.read()
            except (OSError, ValueError, AttributeError):  # closed under it at the end of the test
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            busy = load(
                sim, tmp_path / "busy", "--rate", "5", "-n", "10", "--output-tokens", "4", "--idle-timeout-s", "1"
            )
            beside = load(
                sim, tmp_path / "beside", "--rate", "5", "-n", "10", "--output-tokens", "4", "--idle-timeout-s", "0"
            )
        finally:
            holder.close()
    assert busy.returncode == 3, busy.stderr[-2000:]
    assert "engine busy: 1 running, 0 waiting before the run" in busy.stderr
    assert (
        not list((tmp_path / "busy").glob("load-*/requests.jsonl"))
        or not next((tmp_path / "busy").glob("load-*/requests.jsonl")).read_text()
    )  # nothing was sent
    assert beside.returncode == 0, beside.stderr[-2000:]
    assert "engine idle: not checked (--idle-timeout-s 0" in beside.stderr
    (run,) = (tmp_path / "beside").glob("load-*")
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert events[0]["kind"] == "engine_idle" and events[0]["checked"] is False
    claims = {c["name"]: c["value"] for c in json.loads((run / "claims.json").read_text())["claims"]}
    assert claims["load.engine_running_max"] >= 1  # the other stream ran throughout, on the engine's own metrics


@pytest.mark.timeout(240)
def test_the_search_on_intervals_runs_straddling_rates_again_and_says_how_sure_it_is(tmp_path: Path):
    """One slot, 4 output tokens of 0.05 s: 0.2 s a request, mu = 5 requests/s. 12 requests a trial at 4
    requests/s never queue, all meet TTFT <= 0.5 s, and 12 of 12 straddles 90% ([75.8%, 100%]), 24 of 24
    too ([86.2%, 100%]), 36 of 36 passes ([90.4%, 100%]): the first rate is run three times, pooled, and
    passes. At 8 requests/s the queue grows 0.075 s a request and the last five miss: its upper bound is
    below 90% and it fails at once. The result lies between, and `verify` recomputes every decision."""
    config = {"max_num_seqs": 1, "cost": {"step_overhead_s": 0.05, **FLAT_STEP}}
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        proc = load(
            sim,
            tmp_path,
            "--search",
            "rate",
            "--rate",
            "4",
            "--search-max",
            "16",
            "--arrival",
            "constant",
            "-n",
            "12",
            "--output-tokens",
            "4",
            "--slo",
            "ttft=0.5s",
            "--attainment",
            "0.9",
            "--search-resolution",
            "50%",
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "a pass takes at least 35 requests at a rate" in said
    (folder,) = tmp_path.glob("load-search-*")
    summary = json.loads((folder / "search.json").read_text())
    trials = summary["trials"]
    assert summary["decision"] == "interval" and summary["segments"] == 3
    first = [(t["rate_rps"], t["segment"], t["decision"], t["level_requests"]) for t in trials[:3]]
    assert first == [(4, 0, "undecided", 12), (4, 1, "undecided", 24), (4, 2, "pass", 36)], trials
    for i, t in enumerate(trials):  # every decision follows from the pooled interval, every straddle ran again
        low, high = t["level_attainment_low_pct"], t["level_attainment_high_pct"]
        assert t["decision"] == ("pass" if low >= 90 else "fail" if high < 90 else "undecided"), t
        last = i + 1 == len(trials) or trials[i + 1]["level"] != t["level"]
        assert last == (t["decision"] != "undecided" or t["segment"] == 2), trials
    assert sum(line.startswith("  STRADDLES, more: ") for line in said.splitlines()) >= 2
    low, high = summary["max_rate_rps"], summary["min_failing_rate_rps"]
    assert low is not None and high is not None and 4 <= low < high <= 8, trials
    claims = {c["name"]: c for c in json.loads((folder / "claims.json").read_text())["claims"]}
    extra = sum(t["requests"] for t in trials if t["segment"] > 0)
    assert claims["load.search.extra_requests"]["value"] == extra >= 24
    assert claims["load.search.level.4.decision"]["value"] == "pass"
    assert claims["load.search.level.8.decision"]["value"] in ("fail", "undecided")
    interval = claims["load.search.attainment_pct"]["interval"]
    assert interval["low"] >= 90 and interval["method"] == "Wilson score"
    assert summary["result"].startswith(f"highest rate meeting the SLO: {low:.4f} requests/s (attainment ")
    _, _, again = recompute_search(folder)
    assert {c.name: c.value for c in again} == {name: c["value"] for name, c in claims.items()}
    verified = publish_and_verify(folder, tmp_path / "bundle")
    assert "load.search.extra_requests" in verified.stdout and "load.search.level.4.decision" in verified.stdout
    meta = json.loads((tmp_path / "bundle" / "bundle.json").read_text())
    assert meta["series"][0]["decision"] == "interval"
