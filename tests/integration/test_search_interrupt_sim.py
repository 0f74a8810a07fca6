"""`loadproof run load --search rate` interrupted (SIGINT, as Ctrl-C sends) after some trials, against the
simulator (a real process): the result says first that the search was interrupted and that its rate is a
lower bound, never the highest rate meeting the SLO; the command exits 130; search.json and claims.json
record the interruption; and `loadproof publish` refuses the folder unless `--allow-interrupted`, then
publishes the rate as a lower bound, which `verify` recomputes (and a bundle that drops the interruption fails).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.sim.text import tokenizer_path
from loadproof.verify.checksums import write_sums
from tests.integration.bundles import verify_bundle
from tests.integration.sim_process import SimProcess
from tests.integration.test_load_search_sim import FLAT_STEP
from tests.polling import wait_until

pytestmark = pytest.mark.timeout(240)

FINISHED = 3  # trials finished before the interrupt


def publish(folder: Path, bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadproof", "publish", str(folder), "--out", str(bundle), *args],
        capture_output=True,
        text=True,
        timeout=150,
    )


def finished_trials(out: Path) -> int:
    found = list(out.glob("load-search-*/search.jsonl"))
    return len(found[0].read_text().splitlines()) if found else 0


def test_an_interrupted_rate_search_gives_a_lower_bound_and_publish_refuses_it_unless_asked(tmp_path: Path):
    # an engine that keeps up with every rate tried: every trial passes, so the search doubles towards its
    # maximum (4, 8, 16, 32, 64 requests/s) and is interrupted on its way there; 8 s a trial, so that each tenth
    # of a trial's schedule holds 3 sends or more: load.client_limited compares the tenths' median lags, and a
    # trial of 2 sends (1 requests/s for 2 s) failed as client-limited on one late send of a busy machine
    config = {"max_num_seqs": 64, "cost": {"step_overhead_s": 0.002, **FLAT_STEP}}
    out = tmp_path / "runs"
    with SimProcess(tmp_path / "sim.log", config=config) as sim:
        argv = [sys.executable, "-m", "loadproof", "run", "load", "--url", sim.url, "--endpoint", "completions"]
        argv += ["--tokenizer", str(tokenizer_path()), "--out", str(out), "--input-tokens", "64"]
        argv += ["--search", "rate", "--rate", "4", "--search-max", "64", "--arrival", "constant"]
        argv += ["--duration-s", "8", "--output-tokens", "4", "--slo", "ttft=5s"]
        argv += ["--search-decision", "point"]  # 32 to 128 requests a trial: on intervals none would pass 99%
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: finished_trials(out) >= FINISHED, 150, f"{FINISHED} finished trials")
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, stderr[-3000:]
    (folder,) = out.glob("load-search-*")
    summary = json.loads((folder / "search.json").read_text())
    n = len(summary["trials"])
    assert n >= FINISHED and all(t["passed"] for t in summary["trials"]) and n < 7  # 64 not reached
    best = max(t["rate_rps"] for t in summary["trials"])
    assert summary["interrupted"] is True and summary["lower_bound"] is True and not summary["completed"]
    result = (
        f"search interrupted after {n} finished trial(s): a lower bound, not a result: the rate meeting the SLO "
        f"is at least {best:.4f} requests/s (the search did not finish)"
    )
    assert result in stdout.splitlines() and summary["result"] == result, stdout[-3000:]
    assert "highest rate meeting the SLO" not in stdout + stderr
    claims = {c["name"]: c for c in json.loads((folder / "claims.json").read_text())["claims"]}
    assert "load.search.max_rate_rps" not in claims and claims["load.search.interrupted"]["value"] is True
    assert claims["load.search.rate_lower_bound_rps"]["value"] == best
    report = (folder / "report.md").read_text()
    assert report.index(result) < report.index("SLO:")

    refused = publish(folder, tmp_path / "refused")
    assert refused.returncode == 2 and not (tmp_path / "refused").exists(), refused.stderr[-2000:]
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert "interrupted search" in refused.stderr and "--allow-interrupted" in refused.stderr

    bundle = tmp_path / "bundle"
    published = publish(folder, bundle, "--allow-interrupted")
    assert published.returncode == 0, published.stderr[-2000:]
    assert f"a lower bound, not a result: the rate meeting the SLO is at least {best:.4f}" in published.stdout
    meta = json.loads((bundle / "bundle.json").read_text())
    (series,) = meta["series"]
    assert series["interrupted"] is True
    published_claims = json.loads((bundle / series["path"] / "claims.json").read_text())["claims"]
    names = {c["name"] for c in published_claims}
    assert "load.search.rate_lower_bound_rps" in names and "load.search.max_rate_rps" not in names
    verified = verify_bundle(bundle)
    assert verified.returncode == 0 and "load.search.rate_lower_bound_rps" in verified.stdout, verified.stdout[-2000:]

    # a bundle that says the search finished (its checksums rewritten to match) no longer verifies
    lying = tmp_path / "lying"
    shutil.copytree(bundle, lying)
    meta["series"][0]["interrupted"] = False
    (lying / "bundle.json").write_text(json.dumps(meta))
    (lying / "SHA256SUMS").unlink()
    write_sums(lying)
    failed = verify_bundle(lying)
    assert failed.returncode == 1 and "MISMATCH" in failed.stdout, failed.stdout[-2000:]
