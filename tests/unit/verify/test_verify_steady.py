"""verify recomputes a published load run's steady window (metrics/steady_state.py) and its rates: a tampered
start is a mismatch, and a plan that no longer asks for the window leaves its published claims unproduced.

The run: two requests a second for 120 s, each 4 s long and 10 tokens (tests/unit/metrics/test_steady_state.py),
so MSER-5 leaves out its first 5 s. Each tamperer rewrites SHA256SUMS, so only the recomputation can catch it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loadproof.publish import publish
from loadproof.verify import verify
from tests.unit.metrics.test_load import plan
from tests.unit.metrics.test_steady_state import STEADY_RECORDS
from tests.unit.publish.synthetic import reseal
from tests.unit.verify.load_bundle import write_load_run

NAME = "load-20261206-120000-5eed"
RUN = f"runs/{NAME}"


def write_run(root: Path) -> Path:
    p = plan(planned_requests=len(STEADY_RECORDS), rate_rps=2.0, schedule_span_s=119.5, steady_window=True)
    return write_load_run(root, NAME, p, STEADY_RECORDS)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("steady")
    publish([write_run(root / "src")], root / "bundle")
    return root / "bundle"


@pytest.fixture
def bundle(published, tmp_path):
    shutil.copytree(published, tmp_path / "bundle")
    return tmp_path / "bundle"


def steady_checks(result) -> dict[str, object]:
    return {c.name: c for c in result.checks if ".steady." in c.name}


def test_the_steady_window_and_its_rates_are_recomputed(published):
    result = verify(published)
    assert not result.problems, result.problems
    checks = steady_checks(result)
    assert set(checks) == {
        "load.steady.method",
        "load.steady.start_s",
        "load.steady.end_s",
        "load.steady.output_tokens_per_s",
        "load.steady.request_throughput_rps",
    }
    assert all(c.ok for c in checks.values()), checks
    claims = json.loads((published / RUN / "claims.json").read_text())["claims"]
    start = next(c for c in claims if c["name"] == "load.steady.start_s")
    assert start["value"] == 5.0
    rate = next(c for c in claims if c["name"] == "load.steady.output_tokens_per_s")
    assert rate["interval"]["method"].endswith("of the per-second series")


def test_a_moved_window_is_a_mismatch(bundle):
    path = bundle / RUN / "claims.json"
    payload = json.loads(path.read_text())
    for claim in payload["claims"]:
        if claim["name"] == "load.steady.start_s":
            claim["value"], claim["printed"] = 0.0, "0.000"
    path.write_text(json.dumps(payload))
    reseal(bundle)
    bad = [c for c in verify(bundle).checks if not c.ok]
    assert [c.name for c in bad] == ["load.steady.start_s"]
    assert "outside" in bad[0].reason


def test_a_plan_rewritten_as_before_the_window_leaves_its_claims_unproduced(bundle):
    path = bundle / RUN / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["plan"]["steady_window"]
    path.write_text(json.dumps(manifest))
    reseal(bundle)
    bad = {c.name: c.reason for c in verify(bundle).checks if not c.ok}
    assert set(bad) == set(steady_checks(verify(bundle)))
    assert set(bad.values()) == {"the data does not produce it"}
